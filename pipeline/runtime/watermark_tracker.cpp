#include "pipeline/runtime/watermark_tracker.hpp"

#include <algorithm>

namespace streamctl::runtime {

std::optional<std::int64_t> WatermarkTracker::on_watermark(std::uint32_t channel, std::int64_t watermark) {
  Channel& c = known_[channel];
  c.watermark = std::max(c.watermark, watermark); // a channel's watermark never goes back
  c.idle = false;
  return recompute();
}

std::optional<std::int64_t> WatermarkTracker::on_idle(std::uint32_t channel) {
  known_[channel].idle = true;
  return recompute();
}

std::optional<std::int64_t> WatermarkTracker::on_data(std::uint32_t channel) {
  Channel& c = known_[channel];
  if (!c.idle) return std::nullopt;
  c.idle = false;
  return recompute();
}

std::optional<std::int64_t> WatermarkTracker::on_end(std::uint32_t channel) {
  Channel& c = known_[channel];
  c.watermark = INT64_MAX;
  c.idle = false;
  return recompute();
}

std::optional<std::int64_t> WatermarkTracker::recompute() {
  // Until every channel has spoken, the unknown ones hold the watermark at -infinity.
  if (static_cast<int>(known_.size()) < channels_) return std::nullopt;
  std::int64_t minimum = INT64_MAX;
  bool any_active = false;
  for (const auto& [id, c] : known_) {
    if (c.idle) continue;
    any_active = true;
    minimum = std::min(minimum, c.watermark);
  }
  // All idle: nothing holds the watermark, and nothing advances it either.
  if (!any_active || minimum <= current_) return std::nullopt;
  current_ = minimum;
  return current_;
}

} // namespace streamctl::runtime
