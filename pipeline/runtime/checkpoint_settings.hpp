#pragma once
// The pipeline's [checkpoint] and [restart] tables as the coordinator uses them (SPEC §3).

#include <chrono>
#include <filesystem>
#include <string>

#include "pipeline/runtime/checkpoint_metadata.hpp"
#include "pipeline/spec/pipeline_spec.hpp"
#include "pipeline/spec/snapshot_mode.hpp"

namespace streamctl::runtime {

struct CheckpointSettings {
  std::chrono::milliseconds interval{0}; // 0: no periodic checkpoints
  bool exactly_once = true;
  int retain = 3;
  std::chrono::milliseconds timeout{60'000};
  std::filesystem::path root; // CHECKPOINT_DIR/NAME
  // snapshot = "fork": a child process of the worker serialises and writes each task's
  // state (forked_snapshot.hpp); "copy": the task serialises it before going on; "deferred"
  // (the default): the background writer serialises the key groups of windows and reduce that
  // a checkpoint writes whole, the task those it must change first (state/frozen_key_groups.hpp).
  bool fork_snapshots = false;
};

struct RestartSettings {
  // "none", "fixed" (the same delay each time) or "exponential" (delay doubles, up to 1 min).
  // Default: exponential when the job takes checkpoints, none when it does not (a restart
  // from the beginning would repeat output a stdout sink has written).
  std::string strategy = "none";
  int max_attempts = 5;
  std::chrono::milliseconds delay{1000};
  // A worker silent for this long is taken for dead (SPEC §7: "stops heart-beating"); at
  // least 2 s.
  std::chrono::milliseconds heartbeat_timeout{30'000};

  std::chrono::milliseconds delay_before(int attempt) const {
    if (strategy != "exponential") return delay;
    auto d = delay;
    for (int k = 1; k < attempt && d < std::chrono::minutes(1); ++k) d *= 2;
    return std::min<std::chrono::milliseconds>(d, std::chrono::minutes(1));
  }
};

using pipeline::deferred_snapshots_of;
using pipeline::fork_snapshots_of;

inline std::chrono::milliseconds checkpoint_timeout_of(const pipeline::PipelineSpec& spec) {
  return std::chrono::milliseconds(pipeline::duration_ms_or(spec.root["checkpoint"]["timeout"].node(), 60'000));
}

inline CheckpointSettings checkpoint_settings_of(const pipeline::PipelineSpec& spec,
                                                 const std::filesystem::path& state_dir) {
  CheckpointSettings s;
  auto table = spec.root["checkpoint"];
  s.interval = std::chrono::milliseconds(pipeline::duration_ms_or(table["interval"].node(), 0));
  s.exactly_once = table["mode"].value_or(std::string("exactly-once")) != "at-least-once";
  s.retain = static_cast<int>(table["retain"].value_or(std::int64_t{3}));
  s.timeout = checkpoint_timeout_of(spec);
  s.root = checkpoint_root(spec, state_dir);
  s.fork_snapshots = fork_snapshots_of(spec);
  return s;
}

inline RestartSettings restart_settings_of(const pipeline::PipelineSpec& spec, bool checkpoints) {
  RestartSettings r;
  auto table = spec.root["restart"];
  r.strategy = table["strategy"].value_or(std::string(checkpoints ? "exponential" : "none"));
  r.max_attempts = static_cast<int>(table["max_attempts"].value_or(std::int64_t{5}));
  r.delay = std::chrono::milliseconds(pipeline::duration_ms_or(table["delay"].node(), 1000));
  // Workers beat every second: anything shorter would take live workers for dead.
  r.heartbeat_timeout = std::chrono::milliseconds(
      std::max<std::int64_t>(pipeline::duration_ms_or(table["heartbeat_timeout"].node(), 30'000), 2000));
  return r;
}

} // namespace streamctl::runtime
