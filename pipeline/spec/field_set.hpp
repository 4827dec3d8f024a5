#pragma once
// A set of top-level field names, or "every field" (but some): what projection pushdown (projection.hpp)
// computes for each edge and each source, and what a node type's read_fields function returns.

#include <set>
#include <string>
#include <vector>

#include "state/field_names.hpp"

namespace streamctl::pipeline {

struct FieldSet {
  bool all = false;             // every field (a sink that writes whole records, say)...
  std::set<std::string> except; // ...but these, when all (a map's `remove` before such a sink)
  std::set<std::string> names;  // when !all: only these

  static FieldSet everything() { return FieldSet{true, {}, {}}; }
  static FieldSet none() { return FieldSet{}; }

  // Every field, none excepted: nothing is left out anywhere.
  bool every_field() const { return all && except.empty(); }
  bool contains(const std::string& name) const { return all ? except.count(name) == 0 : names.count(name) != 0; }
  void add(const std::string& name) {
    if (all)
      except.erase(name);
    else
      names.insert(name);
  }
  // Fields no one reads, as a node that overwrites or removes them makes them: left out of an
  // "every field" set (a set of names has none of them unless something reads them).
  void leave_out(const std::string& name) {
    if (all)
      except.insert(name);
    else
      names.erase(name);
  }
  // The union: what either reads.
  void add(const FieldSet& other) {
    if (all && other.all) {
      std::erase_if(except, [&](const std::string& name) { return other.except.count(name) == 0; });
    } else if (all) {
      for (const auto& name : other.names) except.erase(name);
    } else if (other.all) {
      std::set<std::string> mine = std::move(names);
      *this = other;
      for (const auto& name : mine) except.erase(name);
    } else {
      names.insert(other.names.begin(), other.names.end());
    }
  }
  bool operator==(const FieldSet&) const = default;
};

// `listed` as a mask by FieldId (names interned into `names`).
inline std::vector<bool> mask_of(const std::set<std::string>& listed, state::FieldNames& names) {
  std::vector<bool> mask;
  for (const auto& name : listed) {
    state::FieldId id = names.intern(name);
    if (id >= mask.size()) mask.resize(static_cast<std::size_t>(id) + 1, false);
    mask[id] = true;
  }
  return mask;
}

// The set as a mask by FieldId, for the hot paths that drop fields; empty when the set is
// every field (or every field but some: left_out_mask).
inline std::vector<bool> field_mask(const FieldSet& fields, state::FieldNames& names) {
  return fields.all ? std::vector<bool>() : mask_of(fields.names, names);
}

// The fields an "every field but" set leaves out, as a mask by FieldId (names interned into
// `names`); empty when it leaves out none, or when the set is a list of names.
inline std::vector<bool> left_out_mask(const FieldSet& fields, state::FieldNames& names) {
  return fields.all ? mask_of(fields.except, names) : std::vector<bool>();
}

} // namespace streamctl::pipeline
