#pragma once
// [checkpoint] snapshot (SPEC §3): how a task takes its state at a barrier. Here, in the spec
// part, because operators ask it too (deferred snapshots copy the key groups they can copy).
// "deferred" is the default (since December 2026; "copy" before).

#include <string>

#include "pipeline/spec/pipeline_spec.hpp"

namespace streamctl::pipeline {

// The setting, "deferred" where the pipeline does not set it.
inline std::string snapshot_mode_of(const PipelineSpec& spec) {
  return spec.root["checkpoint"]["snapshot"].value_or(std::string("deferred"));
}

inline bool fork_snapshots_of(const PipelineSpec& spec) { return snapshot_mode_of(spec) == "fork"; }

inline bool deferred_snapshots_of(const PipelineSpec& spec) { return snapshot_mode_of(spec) == "deferred"; }

} // namespace streamctl::pipeline
