#pragma once
// A set of top-level field names, or "every field": what projection pushdown (projection.hpp)
// computes for each edge and each source, and what a node type's read_fields function returns.

#include <set>
#include <string>
#include <vector>

#include "state/field_names.hpp"

namespace streamctl::pipeline {

struct FieldSet {
  bool all = false;             // every field (a sink that writes whole records, say)
  std::set<std::string> names;  // when !all: only these

  static FieldSet everything() { return FieldSet{true, {}}; }
  static FieldSet none() { return FieldSet{}; }

  bool contains(const std::string& name) const { return all || names.count(name) != 0; }
  void add(const std::string& name) {
    if (!all) names.insert(name);
  }
  void add(const FieldSet& other) {
    if (all) return;
    if (other.all) {
      all = true;
      names.clear();
      return;
    }
    names.insert(other.names.begin(), other.names.end());
  }
  bool operator==(const FieldSet&) const = default;
};

// The set as a mask by FieldId (names interned into `names`), for the hot paths that drop
// fields; empty when the set is every field.
inline std::vector<bool> field_mask(const FieldSet& fields, state::FieldNames& names) {
  std::vector<bool> mask;
  if (fields.all) return mask;
  for (const auto& name : fields.names) {
    state::FieldId id = names.intern(name);
    if (id >= mask.size()) mask.resize(static_cast<std::size_t>(id) + 1, false);
    mask[id] = true;
  }
  return mask;
}

} // namespace streamctl::pipeline
