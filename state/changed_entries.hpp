#pragma once
// Which entries of a subtask's keyed state changed since the last incremental checkpoint took
// them (Operator::take_changed_entries): per key group, the keys of the entries inserted,
// updated or erased, so that a checkpoint writes a delta of the group (its changed entries as
// they are now, and the keys of those that are gone) rather than the whole group.
//
// "Changed already in this interval?" is answered by the entry itself: the operator updates
// through KeyedMap::try_emplace_marked, which sets the entry's mark bit in the slot the update
// touches anyway, and records the key here only when the mark was not set. An erased entry
// takes its mark with it, so the operator records every erasure. The keys are appended to a
// per-group log (hash, size, bytes: no allocation per key, no second hash table); a take reads
// the log, clears each logged entry's mark (unmark: one probe per changed entry, not per
// update) and drops a key whose entry is present but unmarked (logged twice: erased and made
// again); the keys of erased entries are deduplicated apart. Nothing is recorded until the
// first take, so a job without incremental checkpoints pays nothing.
//
// A group is marked whole (a restore: every entry is new; or more than a quarter of its
// entries changed): its delta would cost more to write than the whole group. A changed entry
// costs a delta two random probes (unmark, then the writer's find) and its key copied, an
// entry of a whole group a step of a sequential scan: with 3.3 M windows loading (tests/bench/
// checkpoint.py), deltas of up to half a group made the job 1.5x slower than full snapshots.
// The group's log is dropped, and the take clears the marks of the whole group (unmark_group:
// KeyedMap moves the group to its next mark epoch, a scan of the table only once in 7). Marking
// is generous by the same rule as ChangedGroups: a key recorded that did not change is only
// written again.
//
// Not thread-safe: the operator's task thread.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "state/key_group.hpp"

namespace streamctl::state {

// The changed entries of one key group, as a take hands them over.
struct GroupEntries {
  std::uint32_t key_group = 0;
  std::vector<std::string> keys; // each once, in the order they first changed, erased last
  // A deferred take (take_logs): the keys are left to the operator to resolve later, and
  // `keys` is empty.
  bool unresolved = false;
};

// One key group's log of changed keys as take_logs hands it over, to resolve() later.
struct GroupLog {
  std::uint32_t key_group = 0;
  std::string log;
};

// Deltas a snapshot writes, each a key group and its changed keys as a plan holds them
// (Operator::defer_key_group_deltas).
using DeltaKeys = std::vector<std::pair<std::uint32_t, const std::vector<std::string>*>>;

class ChangedEntries {
public:
  // A group with more recorded keys than a quarter of its entries plus this is marked whole.
  static constexpr std::size_t whole_slack = 64;
  // Whether a delta of `changed` keys of a group of `entries` is written rather than the group
  // whole (the same rule, for a writer handed the keys of several takes).
  static constexpr bool delta_pays(std::size_t changed, std::size_t entries) {
    return changed <= entries / 4 + whole_slack;
  }

  ChangedEntries() = default;
  explicit ChangedEntries(KeyGroupRange range) : range_(range), groups_(range.size()) {}

  // Whether keys are being recorded (after the first take): then the operator marks entries.
  bool active() const { return active_; }
  // Whether keys of `key_group` are being recorded: active, and the group is not marked whole
  // (an update of a whole group need not mark its entry: the take clears the group's marks).
  bool recording(std::uint32_t key_group) const {
    return active_ && range_.contains(key_group) && !groups_[key_group - range_.first].whole;
  }

  // The entry `key` of `key_group`, filed under `hash`, changed for the first time in this
  // interval (its mark was not set), or was erased. `group_size` is how many entries the group
  // holds now.
  void record(std::uint32_t key_group, std::string_view key, std::uint64_t hash, std::size_t group_size) {
    if (!active_ || !range_.contains(key_group)) return;
    Group& g = groups_[key_group - range_.first];
    if (g.whole) return;
    if (!delta_pays(++g.count, group_size)) {
      mark_whole(key_group);
      return;
    }
    // Memory only, host byte order: u64 hash, u32 size, the bytes.
    const auto size = static_cast<std::uint32_t>(key.size());
    const std::size_t at = g.log.size();
    g.log.resize(at + sizeof hash + sizeof size + key.size());
    std::memcpy(g.log.data() + at, &hash, sizeof hash);
    std::memcpy(g.log.data() + at + sizeof hash, &size, sizeof size);
    if (!key.empty()) std::memcpy(g.log.data() + at + sizeof hash + sizeof size, key.data(), key.size());
  }
  // Every entry of `group` may have changed.
  void mark_whole(std::uint32_t group) {
    if (!range_.contains(group)) return;
    Group& g = groups_[group - range_.first];
    g.whole = true;
    g.count = 0;
    std::string().swap(g.log);
  }
  void mark_all_whole() {
    for (std::uint32_t g = range_.first; g < range_.end; ++g) mark_whole(g);
  }

  // Appends the recorded keys of every group not marked whole that has any to `out`, and
  // forgets them and every whole mark; recording starts with the first call. For each logged
  // key, `unmark(key, hash)` clears the entry's mark and returns what KeyedMap::unmark does:
  // nullopt when the entry is absent (erased), else whether it was marked (false: logged
  // already, dropped); `unmark_group(group)` clears the marks of a group marked whole.
  template <typename Unmark, typename UnmarkGroup>
  void take(std::vector<GroupEntries>& out, Unmark&& unmark, UnmarkGroup&& unmark_group) {
    take(out, std::forward<Unmark>(unmark), std::forward<UnmarkGroup>(unmark_group),
         [](std::string_view, std::uint64_t) {});
  }
  // The same, calling `prefetch(key, hash)` a few keys before `unmark(key, hash)`: each unmark
  // is a probe at a random place of tables that may hold gigabytes, a cache miss (and, with 4 KiB
  // pages, a TLB miss) each; started ahead, several of them overlap.
  template <typename Unmark, typename UnmarkGroup, typename Prefetch>
  void take(std::vector<GroupEntries>& out, Unmark&& unmark, UnmarkGroup&& unmark_group, Prefetch&& prefetch) {
    each_taken(unmark_group, [&](std::uint32_t group, Group& g) {
      GroupEntries e;
      e.key_group = group;
      e.keys.reserve(g.count);
      resolve(g.log, e.keys, unmark, prefetch);
      if (!e.keys.empty()) out.push_back(std::move(e));
    });
  }

  // A take that leaves the keys unresolved (deferred snapshots): appends each group's log to
  // `out` as it is, for the operator to resolve() later (the group's entries keep their marks
  // until then: KeyedMap::begin_pending), and calls `unmark_group(group)` for the groups
  // marked whole. Recording starts with the first call, as with take().
  template <typename UnmarkGroup> void take_logs(std::vector<GroupLog>& out, UnmarkGroup&& unmark_group) {
    each_taken(unmark_group, [&](std::uint32_t group, Group& g) {
      out.push_back(GroupLog{group, std::move(g.log)});
    });
  }

  // The keys of one group's `log` (a GroupLog's, or take()'s), each once, into `keys`: those
  // present and marked first, in the order logged, then those erased. `unmark` and `prefetch`
  // as for take(). Reads nothing of this object: any thread may resolve a log it owns.
  template <typename Unmark, typename Prefetch>
  static void resolve(std::string_view log, std::vector<std::string>& keys, Unmark&& unmark, Prefetch&& prefetch) {
    std::vector<Logged> logged;
    while (!log.empty()) {
      std::uint64_t hash;
      std::uint32_t size;
      std::memcpy(&hash, log.data(), sizeof hash);
      std::memcpy(&size, log.data() + sizeof hash, sizeof size);
      logged.push_back({hash, log.substr(sizeof hash + sizeof size, size)});
      log.remove_prefix(sizeof hash + sizeof size + size);
    }
    std::vector<std::string> erased;
    for (std::size_t i = 0; i < logged.size(); ++i) {
      if (i + prefetch_distance < logged.size())
        prefetch(logged[i + prefetch_distance].key, logged[i + prefetch_distance].hash);
      const auto [hash, key] = logged[i];
      if (const std::optional<bool> was_marked = unmark(key, hash); !was_marked) erased.emplace_back(key);
      else if (*was_marked) keys.emplace_back(key);
    }
    // An entry made and erased again in the interval is logged twice, and absent.
    std::sort(erased.begin(), erased.end());
    erased.erase(std::unique(erased.begin(), erased.end()), erased.end());
    for (std::string& key : erased) keys.push_back(std::move(key));
  }

  // How many keys ahead take() prefetches: enough misses in flight to hide a DRAM latency
  // behind the probes of the keys before.
  static constexpr std::size_t prefetch_distance = 8;

private:
  struct Group;
  // What every take does: the first only starts the recording; after it, `unmark_group(group)`
  // for each group marked whole, `taken(group, g)` for each other group with recorded keys, and
  // every group forgets what it recorded (a log keeps its memory for the next interval).
  template <typename UnmarkGroup, typename Taken> void each_taken(UnmarkGroup& unmark_group, Taken&& taken) {
    if (!active_) {
      active_ = true;
      for (Group& g : groups_) g = Group{};
      return;
    }
    for (std::uint32_t group = range_.first; group < range_.end; ++group) {
      Group& g = groups_[group - range_.first];
      if (g.whole) {
        unmark_group(group);
        g = Group{};
      } else if (g.count > 0) {
        taken(group, g);
        g.count = 0;
        g.log.clear();
      }
    }
  }

  struct Logged {
    std::uint64_t hash;
    std::string_view key; // into the group's log
  };
  struct Group {
    std::string log;         // the recorded keys (record)
    std::size_t count = 0;   // how many
    bool whole = false;
  };

  KeyGroupRange range_;
  std::vector<Group> groups_; // per group of the range
  bool active_ = false;
};

} // namespace streamctl::state
