#pragma once
// `streamctl graph`: the logical graph, the physical plan and its placement on hosts as text,
// Graphviz dot, or JSON.

#include <string>

#include "pipeline/spec/placement_preview.hpp"
#include "pipeline/spec/plan.hpp"

namespace streamctl::pipeline {

enum class GraphFormat { Text, Dot, Json };

// A placement that failed is shown with its message; the caller decides the exit code.
std::string render_graph(const PipelineSpec& spec, const PhysicalPlan& plan,
                         const PlacementPreview& placement, GraphFormat format);

} // namespace streamctl::pipeline
