#pragma once
// What an operator copied of its changed entries as a checkpoint's take of changed entries
// found them (Operator::take_changed_entries, then defer_key_group_deltas): per key group of
// its range, a capture of the operator's own type, from which the group's delta is serialised
// later on the snapshot writer's thread. Finding an entry to unmark it is a random probe of
// tables that may hold gigabytes; copying the entry there spares the barrier a second probe
// (and the serialising, where the copy is raw bytes).
//
// The captures are one take's: valid only until anything changes the state, so the operator
// drops them at its next take and once a snapshot has taken what it wanted (take_fresh).
// Memory only. Not thread-safe: the operator's task thread.

#include <cstdint>
#include <utility>
#include <vector>

#include "state/key_group.hpp"

namespace streamctl::state {

template <typename Capture> class DeltaCaptures {
public:
  DeltaCaptures() = default;
  explicit DeltaCaptures(KeyGroupRange range) : range_(range) {}

  // The capture of `key_group` (of the range): empty until something is captured after a drop.
  Capture& of(std::uint32_t key_group) {
    if (captures_.empty()) {
      captures_.resize(range_.size());
      listed_.resize(range_.size(), 0);
    }
    const std::uint32_t at = key_group - range_.first;
    if (!listed_[at]) {
      listed_[at] = 1;
      touched_.push_back(at);
    }
    return captures_[at];
  }
  // The captures are complete: those of the take just made.
  void mark_fresh() { fresh_ = true; }
  // Whether the captures are the take's just made and not yet used; false from then on (the
  // caller moves out what it uses, and must then drop the rest).
  bool take_fresh() { return std::exchange(fresh_, false); }
  // The capture of `key_group` when it is in the range (nullptr otherwise).
  Capture* find(std::uint32_t key_group) {
    if (!range_.contains(key_group) || captures_.empty()) return nullptr;
    return &captures_[key_group - range_.first];
  }
  // Frees every capture.
  void drop() {
    for (std::uint32_t at : touched_) {
      captures_[at] = Capture{};
      listed_[at] = 0;
    }
    touched_.clear();
    fresh_ = false;
  }

private:
  KeyGroupRange range_;
  std::vector<Capture> captures_; // per group of the range (empty until the first capture)
  std::vector<std::uint8_t> listed_;   // per group: whether in touched_
  std::vector<std::uint32_t> touched_; // groups whose capture may hold something
  bool fresh_ = false;
};

} // namespace streamctl::state
