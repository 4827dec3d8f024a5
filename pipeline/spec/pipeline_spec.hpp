#pragma once
// The pipeline file as typed data (SPEC §3), after parsing and validation.
//
// Each node keeps its own TOML table (`config`) so that the operator that owns the type can
// read its settings; the schema in node_schemas.cpp has already checked every key's type, so
// readers may assume the types are right. toml++ nodes keep their source positions, which
// later errors (a bad expression found at deploy time) use to point at the file.

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "pipeline/spec/diagnostics.hpp"
#include "pipeline/spec/field_set.hpp"

namespace streamctl::pipeline {

enum class NodeRole { Source, Operator, Sink };

// How records move along an edge (timely's "pact"): chosen by the planner, shown by `graph`.
enum class Partition { Forward, Rebalance, Broadcast, Key };

enum class OnError { Drop, Fail, DeadLetter };

// Where a node's type lets it run (SPEC §9), told from its schema by validation: a
// single-instance type (stdin, stdout) reads or writes the coordinator's terminal; a type with
// a `path` key (file) reads or writes files, which are on the coordinator's host unless the
// node says `shared = true` or pins itself with `host`.
enum class NodeReach { Anywhere, CoordinatorTerminal, Path };

struct NodeSpec {
  std::string name;
  NodeRole role = NodeRole::Operator;
  std::string type;
  std::vector<std::string> inputs;
  int parallelism = 0;                   // 0: the pipeline's default
  std::optional<Partition> partition;    // `partition = ...` override of the input edges
  OnError on_error = OnError::Drop;
  std::filesystem::path dead_letter;     // absolute; set when on_error = dead_letter
  NodeReach reach = NodeReach::Anywhere;
  bool one_subtask = false;              // its type runs one subtask only (stdin, a tcp source)
  std::string host;                      // `host = "NAME"` as written; empty: placement decides
  bool shared = false;                   // `shared = true`: its path is on every host
  SourcePos where;                       // the [kind.NAME] header
  toml::table config;                    // the node's own table, as written (+ --set)
};

struct TestCase {
  std::string name;
  std::map<std::string, std::vector<std::string>> input;  // source name -> JSON lines
  std::map<std::string, std::vector<std::string>> expect; // sink name -> JSON lines
  SourcePos where;
};

struct PipelineSpec {
  std::string name;
  std::filesystem::path file;     // as given on the command line
  std::filesystem::path base_dir; // directory of the file: relative paths resolve against it
  int parallelism = 1;
  int max_parallelism = 128;
  std::vector<NodeSpec> nodes;    // sources, then operators, then sinks, each in file order
  std::vector<TestCase> tests;
  toml::table root;               // the whole document after --set overrides
  // Projection pushdown (projection.hpp), filled after validation by plan_projection: by node
  // index, the fields read of each of its inputs, and for a source the fields it must emit.
  // Empty (projection off, or not planned): every field everywhere.
  std::vector<std::vector<FieldSet>> input_fields;
  std::vector<FieldSet> source_fields;

  // Two-phase aggregation (combining.hpp), filled after validation by plan_combining: by node
  // index, whether senders of a key edge into it combine records first. Empty: none do.
  std::vector<bool> combined_nodes;

  bool combines_into(std::size_t node) const {
    return node < combined_nodes.size() && combined_nodes[node];
  }
  FieldSet fields_read(std::size_t node, std::size_t input_index) const {
    if (node >= input_fields.size() || input_index >= input_fields[node].size())
      return FieldSet::everything();
    return input_fields[node][input_index];
  }
  FieldSet fields_emitted(std::size_t source) const {
    return source < source_fields.size() ? source_fields[source] : FieldSet::everything();
  }
  // The index of a node of this spec; nodes.size() for a node of another.
  std::size_t index_of(const NodeSpec& node) const {
    for (std::size_t k = 0; k < nodes.size(); ++k)
      if (&nodes[k] == &node) return k;
    return nodes.size();
  }

  const NodeSpec* find(const std::string& node_name) const {
    for (const auto& n : nodes)
      if (n.name == node_name) return &n;
    return nullptr;
  }
  int parallelism_of(const NodeSpec& n) const { return n.parallelism > 0 ? n.parallelism : parallelism; }
};

// "FILE:LINE:COL" of `key` in the node's table (of the node itself when the key is absent),
// for errors found after validation.
std::string position_of(const PipelineSpec& spec, const NodeSpec& node, std::string_view key);

// A Duration key's value in milliseconds: a string like "5s", or the integer 0 that validation
// also accepts; `fallback` when absent.
std::int64_t duration_ms_or(const toml::node* value, std::int64_t fallback);

const char* role_name(NodeRole role);       // "source" | "operator" | "sink"
const char* partition_name(Partition p);    // "forward" | "rebalance" | "broadcast" | "key"

} // namespace streamctl::pipeline
