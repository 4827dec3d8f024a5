#pragma once
// Checks of the logical graph a pipeline file declares (SPEC §3): every input names a source,
// an operator or a late output of an operator; no sink is an input; no cycle; every sink is
// reachable from a source; at least one source and one sink. Internal to the pipeline spec.

#include <optional>
#include <string>
#include <vector>

#include "pipeline/spec/diagnostics.hpp"
#include "pipeline/spec/pipeline_spec.hpp"

namespace streamctl::pipeline::detail {

struct GraphInput {
  std::string name;
  SourcePos where; // the string in `inputs`
};

struct GraphNode {
  std::string name;
  NodeRole role = NodeRole::Operator;
  SourcePos where; // the node's table
  std::vector<GraphInput> inputs;
  std::optional<std::string> late_output; // `late_output = "NAME"`: a second output, by name
  bool inputs_reported = false;           // its `inputs` had a problem, already reported
};

// `nodes` in file order within each role (sources, operators, sinks); `file_start` is where
// "no source" and "no sink" are reported.
void check_graph(const std::vector<GraphNode>& nodes, const SourcePos& file_start,
                 Diagnostics& out);

} // namespace streamctl::pipeline::detail
