#pragma once
// What an operator copied of its changed entries as a checkpoint's take of changed entries
// found them (Operator::take_changed_entries, then defer_key_group_deltas): per key group of
// its range, a capture of the operator's own type, from which the group's delta is serialised
// later on the snapshot writer's thread. Finding an entry to unmark it is a random probe of
// tables that may hold gigabytes; copying the entry there spares the barrier a second probe
// (and the serialising, where the copy is raw bytes).
//
// The captures are one take's: valid only until anything changes the state, so the operator
// drops them at its next take, and defer() drops them once a snapshot has taken what it wanted.
// Memory only. Not thread-safe: the operator's task thread.
//
// A Capture is default-constructible and movable, and its size() is how many of the group's
// changed keys it holds.

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "state/changed_entries.hpp"
#include "state/frozen_key_groups.hpp"
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
  // Operator::defer_key_group_deltas from the captures of the take just made: for each of
  // `deltas` whose keys were all captured (the take's keys are each once, so as many is the
  // same set) and whose delta pays (`pays(group, keys)`, as snapshot_key_group_delta decides),
  // the copy that `copy(group, Capture&&)` makes, held by `freezer` (KeyGroupFreezer::
  // hold_copies). Drops every capture. nullptr when none was copied, or when the captures are
  // not the take's just made (a second call, or no take since the last drop).
  template <typename Pays, typename Copy>
  std::shared_ptr<FrozenKeyGroups> defer(const DeltaKeys& deltas, KeyGroupFreezer& freezer, Pays&& pays, Copy&& copy) {
    if (!std::exchange(fresh_, false)) return nullptr;
    std::vector<std::uint32_t> groups;
    std::vector<FrozenKeyGroups::GroupCopy> copies;
    for (const auto& [group, keys] : deltas) {
      if (!range_.contains(group) || captures_.empty()) continue;
      Capture& c = captures_[group - range_.first];
      if (keys->empty() || c.size() != keys->size() || !pays(group, keys->size())) continue;
      groups.push_back(group);
      copies.push_back(copy(group, std::move(c)));
    }
    drop();
    if (groups.empty()) return nullptr;
    return freezer.hold_copies(range_, std::move(groups), std::move(copies));
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
