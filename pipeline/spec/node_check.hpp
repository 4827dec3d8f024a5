#pragma once
// Checks one `[sources.NAME]`, `[operators.NAME]` or `[sinks.NAME]` table: the keys every node
// has (type, inputs, parallelism, partition, on_error, dead_letter, host, shared), then its
// type's own keys.
// Internal to the pipeline spec; the graph and the names across nodes are checked afterwards.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

#include <toml++/toml.h>

#include "pipeline/spec/graph_check.hpp"
#include "pipeline/spec/node_schema.hpp"
#include "pipeline/spec/pipeline_spec.hpp"
#include "pipeline/spec/schema_check.hpp"

namespace streamctl::pipeline::detail {

struct NodeDraft {
  NodeSpec spec; // all but `config`; parallelism 0 when not given (1 for single instances)
  GraphNode graph;
  SourcePos name_where;                    // the NAME in the header
  std::optional<std::int64_t> parallelism; // as written, when valid
  SourcePos parallelism_where;
  SourcePos late_output_where;
  SourcePos host_where; // of `host`, when the node pins itself (spec.host set)
};

// Nullopt when `value` is not a table (reported); otherwise the draft, whose problems are in
// the checker.
std::optional<NodeDraft> check_node(Checker& checker, NodeRole role, const toml::key& name,
                                    const toml::node& value,
                                    const std::vector<NodeTypeSchema>& schemas,
                                    const std::filesystem::path& base_dir);

} // namespace streamctl::pipeline::detail
