#pragma once
// The watermark of a task with several input channels (SPEC §7): the minimum over its
// channels, skipping channels that declared themselves idle, with an ended channel counting as
// +infinity. A channel that has said nothing yet holds the minimum at -infinity.

#include <cstdint>
#include <optional>
#include <unordered_map>

namespace streamctl::runtime {

class WatermarkTracker {
public:
  explicit WatermarkTracker(int channels) : channels_(channels) {}

  // Each returns the new task watermark when it advanced, else nullopt.
  std::optional<std::int64_t> on_watermark(std::uint32_t channel, std::int64_t watermark);
  std::optional<std::int64_t> on_idle(std::uint32_t channel);
  std::optional<std::int64_t> on_data(std::uint32_t channel); // data ends a channel's idleness
  std::optional<std::int64_t> on_end(std::uint32_t channel);

  std::int64_t current() const { return current_; }

private:
  struct Channel {
    std::int64_t watermark = INT64_MIN;
    bool idle = false;
  };
  std::optional<std::int64_t> recompute();

  int channels_;
  std::unordered_map<std::uint32_t, Channel> known_;
  std::int64_t current_ = INT64_MIN;
};

} // namespace streamctl::runtime
