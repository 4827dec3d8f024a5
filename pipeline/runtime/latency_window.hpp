#pragma once
// The source-to-here latency of one node subtask, from the latency markers that reached it
// ([metrics] latency_interval). Like Flink's latency histogram, the percentiles are of the
// last kSamples markers, so that they follow the job as it is now rather than since its start;
// `markers` counts every marker seen.
//
// Not thread-safe: the task's thread only.

#include <cstdint>
#include <vector>

#include "pipeline/runtime/metrics_view.hpp"

namespace streamctl::runtime {

class LatencyWindow {
public:
  static constexpr std::size_t kSamples = 1024;

  // `latency_us` may be negative when clocks of two hosts disagree: it counts as 0.
  void add(std::int64_t latency_us);
  std::uint64_t markers() const { return markers_; }
  // Percentiles by the nearest-rank method over the samples kept; all 0 before the first.
  LatencyFigures figures() const;

private:
  std::vector<std::int64_t> samples_; // a ring of at most kSamples
  std::size_t next_ = 0;
  std::uint64_t markers_ = 0;
};

} // namespace streamctl::runtime
