#pragma once
// Which entries of a subtask's keyed state changed since the last incremental checkpoint took
// them (Operator::take_changed_entries): per key group, the keys of the entries inserted,
// updated or erased, each once, so that a checkpoint writes a delta of the group (its changed
// entries as they are now, and the keys of those that are gone) rather than the whole group.
//
// A key is the operator's own bytes (a window: domain and map key); the tracker only keeps
// them. Each is recorded once per interval: a KeyedMap of the changed keys, filed under the
// same hash as the entry, answers "recorded already?" with one probe (about the cost of the
// update itself; nothing is tracked until the first take, so a job without incremental
// checkpoints pays nothing).
//
// A group may instead be marked whole (a restore: every entry is new; or more keys changed
// than a delta could save): its keys are then not kept, and the checkpoint writes it whole.
// Marking is generous by the same rule as ChangedGroups: a key recorded that did not change is
// only written again.
//
// Not thread-safe: the operator's task thread.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "state/key_group.hpp"
#include "state/keyed_map.hpp"

namespace streamctl::state {

// The changed entries of one key group, as a take hands them over.
struct GroupEntries {
  std::uint32_t key_group = 0;
  std::vector<std::string> keys; // unordered, each once
};

class ChangedEntries {
public:
  ChangedEntries() = default;
  ChangedEntries(KeyGroupRange range, std::uint32_t max_parallelism)
      : range_(range), max_parallelism_(max_parallelism), whole_(range.size(), 0) {}

  // Whether keys are being recorded (after the first take).
  bool active() const { return keys_.has_value(); }

  // The entry `key`, filed under `hash` (its key group in the low bits, as KeyedMap's), was
  // inserted, updated or erased. `group_size` is how many entries the group holds now: once
  // the recorded keys outnumber them, a delta saves nothing and the group is marked whole.
  void mark(std::string_view key, std::uint64_t hash, std::size_t group_size) {
    if (!keys_) return;
    const std::uint32_t group = key_group_of(hash, max_parallelism_);
    if (!range_.contains(group)) return;
    std::uint8_t& whole = whole_[group - range_.first];
    if (whole) return;
    keys_->get_or_insert(key, hash);
    if (keys_->group_size(group) > group_size + 64) mark_whole(group);
  }
  // Every entry of `group` may have changed.
  void mark_whole(std::uint32_t group) {
    if (!range_.contains(group)) return;
    whole_[group - range_.first] = 1;
    if (keys_) keys_->clear_group(group);
  }
  void mark_all_whole() {
    for (std::uint32_t g = range_.first; g < range_.end; ++g) mark_whole(g);
  }

  // Appends the recorded keys of every group not marked whole that has any to `out`, and
  // forgets them and every whole mark; recording starts with the first call.
  void take(std::vector<GroupEntries>& out) {
    if (!keys_) {
      keys_.emplace(range_, max_parallelism_);
      std::fill(whole_.begin(), whole_.end(), 0);
      return;
    }
    for (std::uint32_t g = range_.first; g < range_.end; ++g) {
      std::uint8_t& whole = whole_[g - range_.first];
      if (whole) {
        whole = 0;
        continue;
      }
      if (keys_->group_size(g) == 0) continue;
      GroupEntries e;
      e.key_group = g;
      e.keys.reserve(keys_->group_size(g));
      keys_->for_each_in_group(g, [&](std::string_view key, const std::uint8_t&) { e.keys.emplace_back(key); });
      keys_->clear_group(g);
      out.push_back(std::move(e));
    }
  }

private:
  KeyGroupRange range_;
  std::uint32_t max_parallelism_ = 1;
  std::vector<std::uint8_t> whole_;           // per group of the range
  std::optional<KeyedMap<std::uint8_t>> keys_; // recorded keys; none before the first take
};

} // namespace streamctl::state
