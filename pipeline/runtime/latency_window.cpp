#include "pipeline/runtime/latency_window.hpp"

#include <algorithm>
#include <cmath>

namespace streamctl::runtime {

void LatencyWindow::add(std::int64_t latency_us) {
  latency_us = std::max<std::int64_t>(0, latency_us);
  if (samples_.size() < kSamples) samples_.push_back(latency_us);
  else samples_[next_] = latency_us;
  next_ = (next_ + 1) % kSamples;
  ++markers_;
}

LatencyFigures LatencyWindow::figures() const {
  LatencyFigures f;
  f.markers = markers_;
  if (samples_.empty()) return f;
  std::vector<std::int64_t> sorted = samples_;
  std::sort(sorted.begin(), sorted.end());
  auto rank = [&](double q) {
    // Nearest rank: the smallest sample with at least q of the samples at or below it.
    auto k = static_cast<std::size_t>(std::ceil(q * static_cast<double>(sorted.size())));
    return static_cast<double>(sorted[std::clamp<std::size_t>(k, 1, sorted.size()) - 1]) / 1000.0;
  };
  f.p50_ms = rank(0.50);
  f.p95_ms = rank(0.95);
  f.p99_ms = rank(0.99);
  f.max_ms = static_cast<double>(sorted.back()) / 1000.0;
  return f;
}

} // namespace streamctl::runtime
