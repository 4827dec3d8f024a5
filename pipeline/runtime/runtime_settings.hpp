#pragma once
// Top-level pipeline keys that tune the data plane: `batch_size` (records per batch, default
// 1024), `buffer_timeout` (how long a partial batch may wait, default "10ms") and
// [metrics] latency_interval (latency markers, default off).

#include <chrono>
#include <cstddef>

#include "pipeline/spec/pipeline_spec.hpp"

namespace streamctl::runtime {

struct RuntimeSettings {
  std::size_t batch_size = 1024;
  std::chrono::milliseconds buffer_timeout{10};
  // [metrics] latency_interval: how often sources send a latency marker; 0: never.
  std::chrono::milliseconds latency_interval{0};
};

inline RuntimeSettings settings_of(const pipeline::PipelineSpec& spec) {
  RuntimeSettings s;
  if (auto n = spec.root["batch_size"].value<std::int64_t>(); n && *n > 0)
    s.batch_size = static_cast<std::size_t>(*n);
  s.buffer_timeout = std::chrono::milliseconds(pipeline::duration_ms_or(spec.root.get("buffer_timeout"), 10));
  s.latency_interval =
      std::chrono::milliseconds(pipeline::duration_ms_or(spec.root["metrics"]["latency_interval"].node(), 0));
  return s;
}

} // namespace streamctl::runtime
