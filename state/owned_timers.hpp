#pragma once
// Keyed timers read from a key-group segment and kept apart from it: a key-group load
// (operators/operator.hpp, Operator::KeyGroupLoad) decodes on a helper thread, the segment's
// bytes go before the load is installed, and the install registers the timers on the task
// thread. Not thread-safe: one owner at a time.
#include <cstdint>
#include <string>
#include <vector>

#include "state/key_group.hpp"
#include "state/state_codec.hpp"
#include "state/timer_service.hpp"

namespace streamctl::state {

class OwnedTimers {
public:
  void reserve(std::size_t n) { timers_.reserve(n); }
  // Copies `t`, key included.
  void add(const StoredTimer& t) { timers_.push_back({t.domain, std::string(t.key), t.timestamp, t.tag}); }
  // Registers every timer under hash_key_bytes of its key, as an insert would.
  void register_all(TimerService& timers) const {
    for (const Timer& t : timers_) {
      const std::uint64_t hash = hash_key_bytes(t.key);
      if (t.domain == TimeDomain::EventTime)
        timers.register_event_time(t.key, hash, t.timestamp, t.tag);
      else
        timers.register_processing_time(t.key, hash, t.timestamp, t.tag);
    }
  }

private:
  struct Timer {
    TimeDomain domain;
    std::string key;
    std::int64_t timestamp;
    std::int64_t tag;
  };
  std::vector<Timer> timers_;
};

} // namespace streamctl::state
