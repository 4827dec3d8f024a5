#pragma once
// BarrierTimers: what a deferred snapshot (state/frozen_key_groups.hpp) of a keyed operator
// with timers writes after each frozen group's own state: the group's timers as they stood at
// the barrier. Timers are not frozen with the groups (the timer service is one structure for
// all of them, which the task goes on changing), so they are serialised at the barrier, where
// they are cheap (a few per group), and appended when the group itself is written.
//
// A group empty at the barrier (no state, no timer) has no segment: of() says so by nullptr.
// Read-only once built, so the task's and the writer's threads may share one.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "state/key_group.hpp"
#include "state/state_codec.hpp"
#include "state/timer_service.hpp"

namespace streamctl::state {

class BarrierTimers {
public:
  // The timers of each of `groups` within `range` for which is_empty(group) is false.
  template <typename IsEmpty>
  BarrierTimers(KeyGroupRange range, const std::vector<std::uint32_t>& groups, const TimerService& timers,
                IsEmpty&& is_empty)
      : range_(range), timers_(range.size()) {
    for (std::uint32_t g : groups) {
      if (!range.contains(g) || is_empty(g)) continue;
      StateWriter(timers_[g - range.first].emplace()).timers(timers, g);
    }
  }

  // Group g's timers, serialised; nullptr when g was empty at the barrier (or not frozen).
  const std::string* of(std::uint32_t g) const {
    if (!range_.contains(g)) return nullptr;
    const std::optional<std::string>& t = timers_[g - range_.first];
    return t ? &*t : nullptr;
  }

private:
  KeyGroupRange range_;
  std::vector<std::optional<std::string>> timers_; // by group - range_.first
};

} // namespace streamctl::state
