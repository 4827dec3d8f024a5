#pragma once
// A deferred take of an operator's changed entries (deferred snapshots, issue 12: the pause at
// the barrier), from the barrier until it is resolved.
//
// At the barrier the operator takes its ChangedEntries' logs as they are (take_logs) and
// moves each logged group of each of its KeyedMaps to a new mark epoch (begin_pending): the
// entries changed before the barrier keep the epoch left, pending. The plan writes such a group
// as a delta of this take alone, or whole; the operator freezes the delta groups
// (defer_key_group_deltas), and whichever thread claims one (the snapshot writer's, or the task
// in thaw() before it changes the group) resolves it: finds each logged entry, copies it as the
// barrier left it (the group is frozen until then) and clears its pending stamp
// (KeyedMap::resolve_pending). A group not resolved (the plan writes it whole, the writer gave
// the checkpoint up, a rescale moved it) is abandoned: its pending epochs become stale
// (KeyedMap::abandon_pending), so that no later epoch reuses them while stamps remain.
//
// Threading: built, frozen, abandoned and settled on the task's thread; resolve() on the
// thread that claimed the group (each group once), which reads only its log; `resolved` flags
// are atomic so that the task sees, after the frozen set is settled, which were resolved.

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "state/changed_entries.hpp"

namespace streamctl::state {

// `Maps`: how many KeyedMaps of the operator hold marks (a window: one per time domain).
template <std::size_t Maps> class PendingTake {
public:
  using Epochs = std::array<std::uint8_t, Maps>; // per map: the pending epoch

  // From a take's `logs`: `begin(group)` gives the pending epochs of the group's maps
  // (KeyedMap::begin_pending of each). A group with no free epoch in some map (a 0) is handed to
  // `whole(group, epochs)` (which must unmark it whole, abandoning those that are not 0) and
  // left out: the plan writes it whole. The others are appended to `out` as unresolved.
  // nullptr when none is left.
  template <typename Begin, typename Whole>
  static std::shared_ptr<PendingTake> make(std::vector<GroupLog> logs, std::vector<GroupEntries>& out, Begin&& begin,
                                           Whole&& whole) {
    auto take = std::make_shared<PendingTake>();
    for (GroupLog& log : logs) {
      const Epochs epochs = begin(log.key_group);
      bool free = true;
      for (std::uint8_t e : epochs) free = free && e != 0;
      if (!free) {
        whole(log.key_group, epochs);
        continue;
      }
      GroupEntries e;
      e.key_group = log.key_group;
      e.unresolved = true;
      out.push_back(std::move(e));
      take->index_.emplace(log.key_group, take->logs_.size());
      take->logs_.push_back(std::move(log));
      take->epochs_.push_back(epochs);
    }
    if (take->logs_.empty()) return nullptr;
    take->resolved_ = std::make_unique<std::atomic<bool>[]>(take->logs_.size());
    for (std::size_t i = 0; i < take->logs_.size(); ++i) take->resolved_[i].store(false, std::memory_order_relaxed);
    return take;
  }

  // Whether defer_key_group_deltas has dealt with this take (frozen what it wanted).
  bool frozen() const { return frozen_; }

  // The groups among `deltas` (in their order) that this take holds, to be frozen and resolved
  // later; the others are abandoned (`abandon(group, epochs)`: KeyedMap::abandon_pending of
  // each map), as the plan writes them whole. Once per take.
  template <typename Abandon> std::vector<std::uint32_t> freeze(const DeltaKeys& deltas, Abandon&& abandon) {
    frozen_ = true;
    std::vector<std::uint32_t> groups;
    std::vector<char> wanted(logs_.size(), 0);
    for (const auto& [group, keys] : deltas)
      if (auto at = index_.find(group); at != index_.end() && !wanted[at->second]) {
        wanted[at->second] = 1;
        groups.push_back(group);
      }
    for (std::size_t i = 0; i < logs_.size(); ++i)
      if (!wanted[i]) give_up(i, abandon);
    return groups;
  }

  // On the thread that claimed frozen group `group`: its log resolved with the pending epochs of
  // its maps (ChangedEntries::resolve; `unmark(key, hash, epochs)` answers as its Unmark does),
  // into `keys`. Marks the group resolved.
  template <typename Unmark, typename Prefetch>
  void resolve(std::uint32_t group, std::vector<std::string>& keys, Unmark&& unmark, Prefetch&& prefetch) {
    const std::size_t i = index_.at(group);
    const Epochs epochs = epochs_[i];
    ChangedEntries::resolve(
        logs_[i].log, keys, [&](std::string_view key, std::uint64_t hash) { return unmark(key, hash, epochs); },
        prefetch);
    resolved_[i].store(true, std::memory_order_release);
  }

  // A rescale moves `group` out (its frozen group thawed first): abandoned unless resolved.
  template <typename Abandon> void give_up_group(std::uint32_t group, Abandon&& abandon) {
    if (auto at = index_.find(group); at != index_.end()) give_up(at->second, abandon);
  }
  // The next take: every frozen group is settled (thawed, or abandoned with its checkpoint),
  // and those never resolved are abandoned.
  template <typename Abandon> void give_up_unresolved(Abandon&& abandon) {
    for (std::size_t i = 0; i < logs_.size(); ++i) give_up(i, abandon);
  }

private:
  template <typename Abandon> void give_up(std::size_t i, Abandon&& abandon) {
    if (resolved_[i].exchange(true, std::memory_order_acq_rel)) return;
    abandon(logs_[i].key_group, epochs_[i]);
  }

  std::vector<GroupLog> logs_;
  std::vector<Epochs> epochs_;
  std::unique_ptr<std::atomic<bool>[]> resolved_; // per log: resolved or abandoned
  std::unordered_map<std::uint32_t, std::size_t> index_; // group -> log
  bool frozen_ = false;
};

// An operator's last deferred take (`take`: null when none) at its next take, every frozen group
// settled by then: what was not resolved is abandoned, and the take forgotten.
template <std::size_t Maps, typename Abandon> void settle(std::shared_ptr<PendingTake<Maps>>& take, Abandon&& abandon) {
  if (auto t = std::exchange(take, nullptr)) t->give_up_unresolved(abandon);
}
// A rescale moves `group` out of the operator (its frozen group thawed first): abandoned unless
// resolved.
template <std::size_t Maps, typename Abandon>
void give_up_group(const std::shared_ptr<PendingTake<Maps>>& take, std::uint32_t group, Abandon&& abandon) {
  if (take) take->give_up_group(group, abandon);
}

} // namespace streamctl::state
