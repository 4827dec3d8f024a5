#pragma once
// Two-phase aggregation: which nodes' senders combine records into partial aggregates before a
// key edge (operators/window_combiner.hpp says how, and why results do not change). A node
// qualifies when its type's schema says so (NodeTypeSchema::combinable: an event-time tumbling
// or sliding window without allowed lateness whose aggregates do not depend on arrival
// order); the runtime combines on the key edges into it.
//
// Off with the top-level `combine = false`, which the tests use to show that combining never
// changes a job's output.

#include "pipeline/spec/pipeline_spec.hpp"
#include "pipeline/spec/validation.hpp"

namespace streamctl::pipeline {

// Fills spec.combined_nodes for a validated spec.
void plan_combining(PipelineSpec& spec, const SchemaCatalog& catalog);

} // namespace streamctl::pipeline
