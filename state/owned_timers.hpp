#pragma once
// Keyed timers read from a key-group segment and kept apart from it: a key-group load
// (operators/operator.hpp, Operator::KeyGroupLoad) decodes on a helper thread, the segment's
// bytes go before the load is installed, and the install registers the timers on the task
// thread. Not thread-safe: one owner at a time.
#include <cstdint>
#include <string>
#include <vector>

#include "state/error.hpp"
#include "state/key_group.hpp"
#include "state/state_codec.hpp"
#include "state/timer_service.hpp"

namespace streamctl::state {

class OwnedTimers {
public:
  void reserve(std::size_t n) { timers_.reserve(n); }
  // Copies `t`, key included.
  void add(const StoredTimer& t) { timers_.push_back({t.domain, std::string(t.key), t.timestamp, t.tag}); }
  // Reads a key group's timers (StateWriter::timers) from `r` and adds them; an error (the
  // reader's, or a timer whose key is of another group than `key_group`) adds none.
  Result<void> read_group(StateReader& r, std::uint32_t key_group, std::uint32_t max_parallelism) {
    std::vector<StoredTimer> read;
    if (!r.timers(read)) return fail(r.error());
    for (const auto& t : read)
      if (key_group_of(hash_key_bytes(t.key), max_parallelism) != key_group) return fail("a timer of another key group");
    timers_.reserve(timers_.size() + read.size());
    for (const auto& t : read) add(t);
    return {};
  }
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
