#pragma once
// A set of top-level field names, or "every field": what projection pushdown (projection.hpp)
// computes for each edge and each source, and what a node type's read_fields function returns.

#include <set>
#include <string>

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

} // namespace streamctl::pipeline
