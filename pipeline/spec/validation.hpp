#pragma once
// Checks a parsed pipeline document against SPEC §3 and §8 and the schemas of the node types,
// and builds its PipelineSpec. Every problem is reported, each at its own place; nothing stops
// at the first. config_loader.hpp is the entry point most code wants.
//
// Node names, like the job name, are lowercase letters, digits, '_' and '-', unique across
// sources, operators and sinks. An input names a source or an operator, or the `late_output`
// of a node whose schema has that key (SPEC §6, window): NodeSpec::inputs keeps the name as
// written, so the planner resolves such a name to the node that declares it.
//
// A node whose `type` is unknown has only its common keys checked: its other keys cannot be
// told from typos without a schema. A schema `Table` key without children takes any keys.
// `Duration` values are non-negative ("-5s" is refused; a signed bound is a String key read
// with parse_signed_duration_ms).

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "pipeline/spec/diagnostics.hpp"
#include "pipeline/spec/node_schema.hpp"
#include "pipeline/spec/pipeline_spec.hpp"
#include "pipeline/spec/source_text.hpp"

namespace streamctl::pipeline {

// The node types that exist, by role (operators/registry.cpp fills one from the registry).
struct SchemaCatalog {
  std::vector<NodeTypeSchema> sources, operators, sinks;

  // The schema of the node's type in its role; null for an unknown type.
  const NodeTypeSchema* schema_for(const NodeSpec& node) const {
    const auto& list = node.role == NodeRole::Source     ? sources
                       : node.role == NodeRole::Operator ? operators
                                                         : sinks;
    for (const auto& schema : list)
      if (schema.type == node.type) return &schema;
    return nullptr;
  }
};

struct ValidationContext {
  std::string display_name;       // the file in diagnostics for nodes that carry no path
  std::filesystem::path file;     // becomes PipelineSpec::file
  std::filesystem::path base_dir; // absolute; relative paths (dead_letter) resolve against it
  const SchemaCatalog* catalog = nullptr;
  const SourceTexts* texts = nullptr; // for placing expression errors inside strings
};

// Adds every problem of `root` to `out`. When it found none, returns the spec with every
// field set except `root` and each node's `config`, which stay empty: toml++ does not copy
// source positions, so the caller moves tables that still carry them into place.
std::optional<PipelineSpec> validate_pipeline(const toml::table& root, const ValidationContext& ctx,
                                              Diagnostics& out);

} // namespace streamctl::pipeline
