#pragma once
// `streamctl graph`: the logical graph and the physical plan as text, Graphviz dot, or JSON.

#include <string>

#include "pipeline/spec/plan.hpp"

namespace streamctl::pipeline {

enum class GraphFormat { Text, Dot, Json };

std::string render_graph(const PipelineSpec& spec, const PhysicalPlan& plan, GraphFormat format);

} // namespace streamctl::pipeline
