#pragma once
// [checkpoint] snapshot (SPEC §3): how a task takes its state at a barrier. Here, in the spec
// part, because operators ask it too (deferred snapshots copy the key groups they can copy).
// "deferred" is the default (since December 2026; "copy" before).

#include <string>

#include "pipeline/spec/pipeline_spec.hpp"

namespace streamctl::pipeline {

inline bool fork_snapshots_of(const PipelineSpec& spec) {
  return spec.root["checkpoint"]["snapshot"].value_or(std::string("deferred")) == "fork";
}

inline bool deferred_snapshots_of(const PipelineSpec& spec) {
  return spec.root["checkpoint"]["snapshot"].value_or(std::string("deferred")) == "deferred";
}

} // namespace streamctl::pipeline
