#pragma once
// Warnings for a pipeline that is valid but probably not what its author meant (issue 10:
// silent data mistakes), found from the file alone, before anything runs:
//   - a window or join with no `event_time` on any source upstream: it falls back to
//     processing time, so its results depend on timing (SPEC §7);
//   - a field that a node reads and that a source upstream never makes (a generator profile
//     has fixed fields): a misspelt field reads as null, so a filter on it drops every record
//     and a key on it puts every record under one key, with exit 0.
// Each is one line, "FILE:LINE:COL: warning: ...", in node order. `run` logs them at start,
// `validate` prints them; neither fails for them.

#include <string>
#include <vector>

#include "pipeline/spec/pipeline_spec.hpp"
#include "pipeline/spec/validation.hpp"

namespace streamctl::pipeline {

std::vector<std::string> lint_pipeline(const PipelineSpec& spec, const SchemaCatalog& catalog);

// By node index: whether a source with `event_time` is upstream of the node (or is the node).
std::vector<bool> nodes_with_event_time(const PipelineSpec& spec);

} // namespace streamctl::pipeline
