#pragma once
// What keys a node type accepts, and of which type: the data that validation checks a node's
// table against. Each source, operator and sink type declares its schema beside its factory in
// operators/registry.cpp; validation (this folder) only reads the schemas, so the spec layer
// needs no knowledge of the operators themselves.
//
// Keys every node has (type, inputs, parallelism, partition, on_error, dead_letter, host,
// shared) are checked by validation itself and are not listed in a schema.
//
// Where a node may run (SPEC §9) follows from its schema: a single-instance type reads or
// writes the coordinator's terminal and runs on its host; a type with a `path` key reads or
// writes files, and takes `shared = true` (NodeReach in pipeline_spec.hpp).

#include <functional>
#include <string>
#include <vector>

#include "pipeline/spec/field_set.hpp"

namespace streamctl::pipeline {

struct NodeSpec;
struct PipelineSpec;

// Projection pushdown (projection.hpp): given the fields that consumers read of a node's main
// output and of its late output, the fields the node reads of each of its inputs (one entry per
// `inputs` name, in order). A node type without one reads every field of every input (a sink
// that writes whole records). It must not throw: what it cannot analyse (an expression that
// does not compile, which validation reports anyway) it answers with FieldSet::everything().
using ReadFields = std::function<std::vector<FieldSet>(
    const PipelineSpec& spec, const NodeSpec& node, const FieldSet& main_needed,
    const FieldSet& late_needed)>;

// For a source whose records always have the same fields (a generator profile): those fields,
// so that lint (lint.hpp) can tell a field read downstream that no record will ever have.
// FieldSet::everything() when unknown (files, stdin).
using MadeFields = std::function<FieldSet(const NodeSpec& node)>;
// Whether the senders of a key edge into the node may combine its records into partial
// aggregates before the exchange (operators/window_combiner.hpp).
using Combinable = std::function<bool(const PipelineSpec& spec, const NodeSpec& node)>;

enum class KeyType {
  String,
  Int,
  Float,         // an int is accepted too
  Bool,
  Duration,      // "250ms", "5s", "2m", "1h", "1d"
  Size,          // "64KiB", "10MB", or an int of bytes
  Expression,    // a string that compiles as an expression (SPEC §5)
  ExpressionMap, // a table of name = "expression"
  StringArray,
  StringMap,     // a table of name = "string"
  Enum,          // a string, one of `choices`
  Table,         // a table with the keys in `children`
};

struct KeySchema {
  std::string name;
  KeyType type = KeyType::String;
  bool required = false;
  std::vector<std::string> choices;  // for Enum
  std::vector<KeySchema> children;   // for Table
  std::string help;                  // one line, for messages and docs
};

struct NodeTypeSchema {
  std::string type;                  // the TOML `type`
  std::vector<KeySchema> keys;
  bool takes_inputs = true;          // false for sources
  bool single_instance = false;      // stdin and stdout: parallelism is always 1, and it runs
                                     // on the coordinator's host (its terminal)
  bool one_subtask = false;          // parallelism is always 1, on any host (a tcp source
                                     // listening on one address)
  std::string one_subtask_if;        // a boolean key that, when true, makes it one_subtask
                                     // (a file source's `follow`: one reader tails the files)
  ReadFields read_fields;            // empty: reads every field of every input
  MadeFields made_fields;            // sources only; empty: the fields are not known
  Combinable combinable;             // empty: never combined
};

const char* key_type_name(KeyType t);

} // namespace streamctl::pipeline
