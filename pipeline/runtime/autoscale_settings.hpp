#pragma once
// The pipeline's [autoscale] table as the autoscaler uses it (SPEC §3; man
// streamctl-pipeline(5), AUTOSCALE). Validation (pipeline/spec/autoscale_check.hpp) has
// checked every value, so this only reads them and fills in defaults.

#include <chrono>
#include <cstdint>

#include "pipeline/spec/pipeline_spec.hpp"

namespace streamctl::runtime {

struct AutoscaleSettings {
  bool enabled = false;
  // Bounds of every parallelism the autoscaler picks; max defaults to the job's
  // max_parallelism (the host's worker limits still apply to each rescale).
  int min_parallelism = 1;
  int max_parallelism = 128;
  // How often a decision is made, from the metrics observed since the last one.
  std::chrono::milliseconds interval{30'000};
  // The busy fraction each instance is sized for: 0.7 leaves 30% for bursts and catching up.
  double target_utilization = 0.7;
  // No decision for this long after a rescale: the restored job first catches up on the
  // backlog the rescale built, and rates measured meanwhile are not the steady state.
  std::chrono::milliseconds cooldown{60'000};
};

inline AutoscaleSettings autoscale_settings_of(const pipeline::PipelineSpec& spec) {
  AutoscaleSettings s;
  auto table = spec.root["autoscale"];
  s.enabled = table["enabled"].value_or(false);
  s.min_parallelism = static_cast<int>(table["min_parallelism"].value_or(std::int64_t{1}));
  s.max_parallelism =
      static_cast<int>(table["max_parallelism"].value_or(std::int64_t{spec.max_parallelism}));
  s.interval =
      std::chrono::milliseconds(pipeline::duration_ms_or(table["interval"].node(), 30'000));
  s.target_utilization = table["target_utilization"].value_or(0.7);
  s.cooldown =
      std::chrono::milliseconds(pipeline::duration_ms_or(table["cooldown"].node(), 60'000));
  return s;
}

} // namespace streamctl::runtime
