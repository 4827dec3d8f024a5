#pragma once
// [checkpoint] snapshot (SPEC §3): how a task takes its state at a barrier. Here, in the spec
// part, because operators ask it too (deferred snapshots copy the key groups they can copy).

#include <string>

#include "pipeline/spec/pipeline_spec.hpp"

namespace streamctl::pipeline {

inline bool fork_snapshots_of(const PipelineSpec& spec) {
  return spec.root["checkpoint"]["snapshot"].value_or(std::string("copy")) == "fork";
}

inline bool deferred_snapshots_of(const PipelineSpec& spec) {
  return spec.root["checkpoint"]["snapshot"].value_or(std::string("copy")) == "deferred";
}

} // namespace streamctl::pipeline
