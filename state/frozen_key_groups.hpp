#pragma once
// Deferred snapshots ([checkpoint] snapshot = "deferred"): key groups frozen at a barrier and
// serialised later, off the task thread, with copy-on-first-write where the operator can copy a
// group and serialise-on-first-write where it cannot.
//
// At a barrier the task freezes the key groups that the checkpoint writes whole (a
// FrozenKeyGroups, one per operator and checkpoint) instead of serialising them. The snapshot
// writer's thread then serialises them one by one, in the order of the file's segments, reading
// the operator's tables of one group at a time. The task goes on meanwhile, and before it
// changes anything of a group (or reads it to change it: a record for its key, a timer that
// fires, a ttl sweep, a rescale that moves it, the next checkpoint's bookkeeping), it calls
// thaw(group). A group still pending is then copied (when the operator gave a `copy` function:
// its tables as bytes, a memcpy each) or else serialised there and then by the task, as it was
// at the barrier; one the writer is serialising is waited for. So the bytes of every group are
// those of the barrier, and a group is only ever read by two threads at once, never written
// while the other reads it. A copy is serialised by the writer, and freed once it is.
//
// Per group one atomic state:
//
//   pending --claim (CAS, either thread)--> claimed --serialised--> done
//   pending --copy (the task: CAS to claimed, copy, publish)--> copied
//   copied --claim (CAS, the writer)--> writing_copy --serialised--> done
//   done --taken (CAS, the writer)--> abandoned  (the bytes are the writer's now)
//   pending, copied or done --abandon (either thread)--> abandoned  (the checkpoint will not be
//                                                       written; copies and bytes are freed)
//   claimed or writing_copy --the serialising or copying threw--> abandoned  (then rethrown)
//
// The thread that wins the claim serialises the group into its slot (or copies it) and then
// publishes `done` or `copied` (release); the writer takes the slot's bytes or copy after it
// reads that (acquire), and the task writes the group's state only after it reads `done`,
// `copied` or `abandoned` (acquire), which orders the writer's reads of the group before the
// task's writes. `unsettled_` counts the groups that the task must still thaw (pending or
// claimed), so that thaw() costs one atomic load once all are.
//
// Copies are bounded: past `copy_budget` bytes of copies not yet written, the task serialises
// pending groups itself, as without a copy function (stalls() says how much was copied).
//
// Where the operator can copy, the writer leaves the task `copy_grace` after the barrier to
// copy what it touches first, before it claims a pending group itself: a group the writer is
// serialising holds up a task that needs it for as long as serialising it takes (173 ms of a
// 16 MB group of windows, seen when the writer started on the group that the first batch after
// the barrier touched), where the task's copy of it takes a few milliseconds.
//
// Threading: thaw(), thaw_all() and stalls() on the task thread only; take() on the writer's
// thread only (one taker); abandon(), settled() and the accessors on any thread. The
// `serialise` and `copy` functions run on whichever thread claims a group: they must read only
// the state of that group and configuration that nothing changes (never a structure that other
// groups share with it, such as a TimerService: copy that at the barrier). What `copy` returns
// runs on the writer's thread, and may read the same configuration: abandon() waits for it.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "state/key_group.hpp"
#include "state/keyed_map.hpp"

namespace streamctl::state {

class FrozenKeyGroups {
public:
  // Appends the state of `key_group` as it was at the barrier to `out` (what the operator's
  // snapshot_key_group would have appended then).
  using Serialise = std::function<void(std::uint32_t key_group, std::string& out)>;
  // A copy of one group's state as it was at the barrier, which serialises it later.
  struct GroupCopy {
    std::function<void(std::string& out)> serialise; // appends what `Serialise` would have
    std::size_t bytes = 0;                           // memory the copy holds
  };
  // Copies `key_group` as it is now. Empty: the operator cannot copy its state (then the task
  // serialises a group it must change first).
  using Copy = std::function<GroupCopy(std::uint32_t key_group)>;
  // Copies not yet written, at most: past this the task serialises instead of copying.
  static constexpr std::size_t default_copy_budget = std::size_t{512} << 20;
  // How long after the barrier the writer waits for the task to copy a group before it
  // serialises the group itself (only where there is a copy function; see above).
  static constexpr std::chrono::milliseconds copy_grace{100};

  // `groups`: distinct groups of `range`, in the order of the snapshot's segments.
  FrozenKeyGroups(KeyGroupRange range, std::vector<std::uint32_t> groups, Serialise serialise, Copy copy = {},
                  std::size_t copy_budget = default_copy_budget);
  // Groups copied already at the barrier (`copies[i]` of `groups[i]`): nothing for the task to
  // thaw, the writer serialises each copy. For what an operator copies as it takes its
  // changes, such as the entries of a delta (Operator::defer_key_group_deltas).
  FrozenKeyGroups(KeyGroupRange range, std::vector<std::uint32_t> groups, std::vector<GroupCopy> copies);
  FrozenKeyGroups(const FrozenKeyGroups&) = delete;
  FrozenKeyGroups& operator=(const FrozenKeyGroups&) = delete;

  std::size_t size() const { return groups_.size(); }
  std::uint32_t group(std::size_t index) const { return groups_[index]; }

  // --- The task's thread ---
  // Before the task changes `key_group` (or reads it to change it): returns at once unless the
  // group is frozen and not yet serialised or copied; then copies or serialises it now, or
  // waits while the writer serialises it.
  void thaw(std::uint32_t key_group) {
    if (unsettled_.load(std::memory_order_acquire) == 0) return;
    thaw_slow(key_group);
  }
  // thaw() of every group, before what sweeps many (the next checkpoint, the end of input).
  void thaw_all();
  // What thaw() and thaw_all() cost the task so far: the time spent copying, serialising or
  // waiting, the groups the task serialised itself, and those it copied.
  struct Stalls {
    std::chrono::nanoseconds total{0};
    std::chrono::nanoseconds longest{0}; // of one thaw or thaw_all call
    std::chrono::nanoseconds waited{0};  // of `total`: waiting while the writer serialised a group
    std::size_t groups_by_task = 0;
    std::size_t groups_copied = 0;
    std::size_t copied_bytes = 0; // in all, written or not
  };
  const Stalls& stalls() const { return stalls_; }

  // --- The writer's thread ---
  // The bytes of the group at `index` as frozen: serialised here (from the task's copy, if it
  // made one) unless the task has serialised them (then waits for it if it is at it). nullopt:
  // abandoned.
  std::optional<std::string> take(std::size_t index);
  // Serialises every group still pending now, ahead of the take()s (which then hand the bytes
  // over): for small sets that the task would otherwise claim group by group as its first
  // batch after the barrier touches them (the deltas of a take left unresolved).
  void serialise_ahead();

  // --- Any thread ---
  // The checkpoint will not be written (the writer dropped it, the task ends): groups still
  // pending or copied are never serialised; returns once no thread is serialising one (a group
  // claimed is finished first), after which `serialise`, `copy` and the copies are never called
  // again.
  void abandon();
  // Whether every group is done, copied or abandoned: the task may change any of them. (The
  // writer may still serialise copies, reading the operator's configuration.)
  bool settled() const { return unsettled_.load(std::memory_order_acquire) == 0; }
  // Whether `key_group` is frozen and not yet serialised (pending or being serialised): a change
  // to it now would be a bug (debug assertions).
  bool unsettled(std::uint32_t key_group) const;

private:
  enum State : std::uint8_t { pending = 0, claimed = 1, done = 2, abandoned = 3, copied = 4, writing_copy = 5 };
  enum class By { writer, task };

  void thaw_slow(std::uint32_t key_group);
  // Serialises `index` if it is pending (claiming it; the task copies it instead where it can),
  // or waits until it is no longer claimed. Returns the state it leaves.
  State settle(std::size_t index, By by);
  // Publishes `to` (done, copied or abandoned) for a group that was pending or claimed.
  void finish(std::size_t index, State to);
  void record_stall(std::chrono::steady_clock::time_point start);
  // The writer's side of copy_grace: until then, waits while `index` is pending.
  void leave_to_task(std::size_t index) const;

  KeyGroupRange range_;
  std::vector<std::uint32_t> groups_;
  std::vector<std::int32_t> index_of_; // per group of range_: its index in groups_, or -1
  Serialise serialise_;
  Copy copy_;
  std::size_t copy_budget_;
  std::atomic<std::size_t> copies_held_{0}; // bytes of copies not yet written or dropped
  std::unique_ptr<std::atomic<std::uint8_t>[]> states_; // per index: State
  std::vector<std::string> bytes_;                      // per index: written by the claimer
  std::vector<GroupCopy> copies_;                       // per index: the task's copy, if any
  std::atomic<std::size_t> unsettled_;
  Stalls stalls_; // the task's thread only
  const std::chrono::steady_clock::time_point frozen_at_ = std::chrono::steady_clock::now();
};

// What an operator holds: its latest FrozenKeyGroups (shared with the snapshot writer), behind
// thaw()s that cost a null test when there is none. Task thread only, but for the write check
// (KeyedMap::set_write_check), which runs on the thread that writes.
//
// It abandons, at its end, every set it froze that is not settled yet (the latest, and earlier
// ones whose copies the writer may still serialise), since those may read the operator.
class KeyGroupFreezer final : public KeyGroupWriteCheck {
public:
  KeyGroupFreezer() = default;
  KeyGroupFreezer(const KeyGroupFreezer&) = delete;
  KeyGroupFreezer& operator=(const KeyGroupFreezer&) = delete;
  // Abandons what is still frozen, so that no other thread reads the operator's state after
  // it is gone (declare it after the state it guards, destroy the state after calling abandon()).
  ~KeyGroupFreezer() { abandon(); }

  // Freezes `groups` for a deferred snapshot: the groups of earlier freezes are thawed first.
  std::shared_ptr<FrozenKeyGroups> freeze(KeyGroupRange range, std::vector<std::uint32_t> groups,
                                          FrozenKeyGroups::Serialise serialise, FrozenKeyGroups::Copy copy = {},
                                          std::size_t copy_budget = FrozenKeyGroups::default_copy_budget);
  // freeze() of more groups at the same barrier (none frozen already): those frozen before stay
  // frozen, and thaw() thaws a group of either.
  std::shared_ptr<FrozenKeyGroups> freeze_also(KeyGroupRange range, std::vector<std::uint32_t> groups,
                                               FrozenKeyGroups::Serialise serialise, FrozenKeyGroups::Copy copy = {},
                                               std::size_t copy_budget = FrozenKeyGroups::default_copy_budget);
  // Copies made at the barrier (the constructor from copies), held so that the end of the
  // operator abandons them, as it does what freeze() returned, if the writer has not yet
  // serialised them: their serialisers may read the operator. The latest freeze stays frozen.
  std::shared_ptr<FrozenKeyGroups> hold_copies(KeyGroupRange range, std::vector<std::uint32_t> groups,
                                               std::vector<FrozenKeyGroups::GroupCopy> copies);
  void thaw(std::uint32_t key_group) {
    for (const auto& f : frozen_) f->thaw(key_group);
  }
  void thaw_all() {
    for (const auto& f : frozen_) f->thaw_all();
  }
  // Whether `key_group` is frozen and not yet serialised or copied: a thaw() would stall.
  bool unsettled(std::uint32_t key_group) const {
    for (const auto& f : frozen_)
      if (f->unsettled(key_group)) return true;
    return false;
  }
  void abandon();
  // Aborts when `key_group` is frozen and not yet serialised: give it to the operator's maps
  // (KeyedMap::set_write_check), which ask in debug builds.
  void check_write(std::uint32_t key_group) const override;

private:
  std::vector<std::shared_ptr<FrozenKeyGroups>> frozen_; // the latest barrier's (one or two)
  std::vector<std::weak_ptr<FrozenKeyGroups>> earlier_; // superseded sets and held copies, while someone holds them
};

} // namespace streamctl::state
