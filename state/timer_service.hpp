#pragma once
// Timers of one keyed operator subtask, in event time and in processing time, as Flink's
// InternalTimerService: a timer is (key, tag, timestamp) in one time domain, where the tag is a
// namespace chosen by the operator (a window's end, a join side; 0 when unused). Registering an
// existing timer again is a no-op; deleting an absent one too.
//
// Layout, per timer (about 85 bytes at a million timers, vector slack included):
//   - a record (48 bytes: the key as in KeyedMap, 15 bytes inline or an offset into one
//     long-key buffer; timestamp, tag, key hash; its position in its heap), in a vector with a
//     free list;
//   - an entry in the 4-ary min-heap of its time domain (16 bytes: timestamp, the high 32 bits
//     of the key hash, record id; the four children of a node share one cache line, so a heap
//     of a million timers is 10 levels of one line each). Timers fire in order of (timestamp,
//     hash, tag): those of equal timestamp in a fixed order, whatever the order of
//     registration. Deletion is eager (the record knows its heap position), so deleted timers
//     cost nothing later;
//   - an 8-byte slot (record id, 32 bits of a hash of the timer) in an open-addressing table of
//     its key group, for deduplication, deletion and per-group iteration (snapshots).
// Register, delete and firing one timer are O(log n).
//
// Firing: advance_watermark(w, fire) raises the watermark to w (never lowers it) and calls
// fire(key_bytes, hash, timestamp, tag) for every event-time timer with timestamp <= the
// watermark, earliest first, removing each before its call. `fire` may register and delete
// timers; new ones at or below the watermark fire in the same call (so a callback that always
// re-registers its own timer at or below the watermark never returns). `key_bytes` is valid
// only during the call. `fire` must not advance time itself.
//
// Not thread-safe: one service belongs to one subtask thread.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "state/key_group.hpp"
#include "state/keyed_map.hpp"

namespace streamctl::state {

enum class TimeDomain : std::uint8_t { EventTime = 0, ProcessingTime = 1 };

// One timer, as for_each_in_group shows it. `key` is valid during the visit only.
struct TimerView {
  TimeDomain domain;
  std::string_view key;
  std::uint64_t hash;
  std::int64_t timestamp;
  std::int64_t tag;
};

class TimerService {
public:
  // The timers of the subtask owning `range` of the key groups [0, max_parallelism); a timer
  // belongs to key group key_group_of(hash, max_parallelism).
  TimerService(KeyGroupRange range, std::uint32_t max_parallelism);
  ~TimerService();
  TimerService(TimerService&&) noexcept;
  TimerService& operator=(TimerService&&) noexcept;
  TimerService(const TimerService&) = delete;
  TimerService& operator=(const TimerService&) = delete;

  // Return true when the timer was added (false: it existed already).
  bool register_event_time(std::string_view key, std::uint64_t hash, std::int64_t timestamp,
                           std::int64_t tag = 0) {
    return add(TimeDomain::EventTime, key, hash, timestamp, tag);
  }
  bool register_processing_time(std::string_view key, std::uint64_t hash, std::int64_t timestamp,
                                std::int64_t tag = 0) {
    return add(TimeDomain::ProcessingTime, key, hash, timestamp, tag);
  }
  // Return true when the timer existed.
  bool delete_event_time(std::string_view key, std::uint64_t hash, std::int64_t timestamp,
                         std::int64_t tag = 0) {
    return remove(TimeDomain::EventTime, key, hash, timestamp, tag);
  }
  bool delete_processing_time(std::string_view key, std::uint64_t hash, std::int64_t timestamp,
                              std::int64_t tag = 0) {
    return remove(TimeDomain::ProcessingTime, key, hash, timestamp, tag);
  }
  bool contains(TimeDomain domain, std::string_view key, std::uint64_t hash, std::int64_t timestamp,
                std::int64_t tag = 0) const;

  // Fires event-time timers up to `watermark` (see the top of this file).
  template <typename F> void advance_watermark(std::int64_t watermark, F&& fire) {
    advance(TimeDomain::EventTime, watermark, fire);
  }
  // Fires processing-time timers up to `now`, in the same way.
  template <typename F> void advance_processing_time(std::int64_t now, F&& fire) {
    advance(TimeDomain::ProcessingTime, now, fire);
  }

  // The earliest pending timestamp of a domain, if any.
  std::optional<std::int64_t> next_event_time() const { return next(TimeDomain::EventTime); }
  std::optional<std::int64_t> next_processing_time() const {
    return next(TimeDomain::ProcessingTime);
  }
  // The highest time advanced to; INT64_MIN before the first advance.
  std::int64_t current_watermark() const { return current_[0]; }
  std::int64_t current_processing_time() const { return current_[1]; }
  // For a restore from a snapshot: raises the current time of `domain` to `time` (never
  // lowers it) without firing anything; timers at or below it fire at the next advance.
  void restore_current_time(TimeDomain domain, std::int64_t time) {
    std::int64_t& current = current_[static_cast<int>(domain)];
    if (time > current) current = time;
  }

  std::size_t size() const { return heaps_[0].size() + heaps_[1].size(); }
  std::size_t size(TimeDomain domain) const { return heap(domain).size(); }
  bool empty() const { return size() == 0; }

  // Visits every timer of one key group (both domains, any order) as a TimerView: what a
  // snapshot writes for the group. `f` must not register or delete timers.
  template <typename F> void for_each_in_group(std::uint32_t key_group, F&& f) const {
    const GroupIndex& g = group_at(key_group);
    for (std::uint32_t i = 0; i < g.capacity(); ++i)
      if (g.slots[i].id_plus_one != 0) f(view(g.slots[i].id_plus_one - 1));
  }

  KeyGroupRange key_group_range() const { return range_; }
  std::uint32_t max_parallelism() const { return max_parallelism_; }

  // Heap bytes held (vector capacities, tables, long keys); allocator overhead not counted.
  std::size_t memory_bytes() const;

private:
  struct HeapEntry {
    std::int64_t timestamp;
    std::uint32_t hash_high; // hash >> 32: most ties of timestamp are decided without a record
    std::uint32_t id;        // index into records_
  };
  static_assert(sizeof(HeapEntry) == 16);
  // The entries of a 4-ary heap, positions 0..size-1, stored after 3 entries of padding in a
  // 64-byte-aligned buffer so that the children 4p+1..4p+4 of every node fill one cache line.
  class Heap {
  public:
    Heap() = default;
    ~Heap();
    Heap(Heap&& other) noexcept;
    Heap& operator=(Heap&& other) noexcept;
    std::uint32_t size() const { return size_; }
    bool empty() const { return size_ == 0; }
    HeapEntry& operator[](std::uint32_t pos) { return base_[pos + padding]; }
    const HeapEntry& operator[](std::uint32_t pos) const { return base_[pos + padding]; }
    void reserve_one_more(); // may throw; afterwards push_back cannot
    void push_back(const HeapEntry& e) { base_[padding + size_++] = e; }
    void pop_back() { --size_; }
    std::size_t memory_bytes() const {
      return capacity_ == 0 ? 0 : (capacity_ + padding) * sizeof(HeapEntry);
    }

  private:
    static constexpr std::uint32_t padding = 3;
    HeapEntry* base_ = nullptr;
    std::uint32_t size_ = 0;
    std::uint32_t capacity_ = 0;
  };
  struct Record {
    detail::StoredKey key;
    std::int64_t timestamp;
    std::int64_t tag;
    std::uint64_t hash;
    std::uint32_t heap_pos; // position in its heap; next free record while on the free list
    TimeDomain domain;
    bool live;
  };
  static_assert(sizeof(Record) == 48);
  struct IndexSlot {
    std::uint32_t id_plus_one; // 0: empty
    std::uint32_t fingerprint; // high 32 bits of the timer's hash; its high bits: home slot
  };
  struct GroupIndex {
    std::unique_ptr<IndexSlot[]> slots;
    std::uint32_t mask = 0;
    std::uint32_t size = 0;
    std::uint32_t grow_at = 0;
    std::uint8_t shift = 0; // 32 - log2(capacity)
    std::uint32_t capacity() const { return slots ? mask + 1 : 0; }
    std::uint32_t home(std::uint32_t fingerprint) const { return fingerprint >> shift; }
    std::uint32_t distance(std::uint32_t i) const {
      return (i - home(slots[i].fingerprint)) & mask;
    }
  };
  struct Fired {
    std::uint64_t hash;
    std::int64_t timestamp;
    std::int64_t tag;
  };
  // Resets the firing flag however the callback leaves.
  struct FiringScope {
    explicit FiringScope(bool& flag) : flag_(flag) { flag_ = true; }
    ~FiringScope() { flag_ = false; }
    FiringScope(const FiringScope&) = delete;
    FiringScope& operator=(const FiringScope&) = delete;
    bool& flag_;
  };

  template <typename F> void advance(TimeDomain domain, std::int64_t time, F& fire) {
    STREAMCTL_STATE_ASSERT(!firing_, "time advanced from inside a timer callback");
    std::int64_t& current = current_[static_cast<int>(domain)];
    if (time > current) current = time;
    FiringScope scope(firing_);
    Fired t{};
    while (pop_due(domain, current, t))
      fire(std::string_view(fired_key_), t.hash, t.timestamp, t.tag);
  }

  bool add(TimeDomain domain, std::string_view key, std::uint64_t hash, std::int64_t timestamp,
           std::int64_t tag);
  bool remove(TimeDomain domain, std::string_view key, std::uint64_t hash, std::int64_t timestamp,
              std::int64_t tag);
  // Removes the earliest timer of `domain` if its timestamp is <= limit, copying its key into
  // fired_key_.
  bool pop_due(TimeDomain domain, std::int64_t limit, Fired& out);
  std::optional<std::int64_t> next(TimeDomain domain) const;
  TimerView view(std::uint32_t id) const;

  Heap& heap(TimeDomain d) { return heaps_[static_cast<int>(d)]; }
  const Heap& heap(TimeDomain d) const { return heaps_[static_cast<int>(d)]; }
  GroupIndex& group_for(std::uint64_t hash);
  GroupIndex& group_at(std::uint32_t key_group);
  const GroupIndex& group_at(std::uint32_t key_group) const;

  std::uint32_t find_slot(const GroupIndex& g, std::uint32_t fingerprint, TimeDomain domain,
                          const detail::KeyProbe& probe, std::uint64_t hash, std::int64_t timestamp,
                          std::int64_t tag) const;
  std::uint32_t find_slot_of(const GroupIndex& g, std::uint32_t fingerprint,
                             std::uint32_t id) const;
  static void index_place(GroupIndex& g, std::uint32_t fingerprint, std::uint32_t id);
  void index_erase_at(GroupIndex& g, std::uint32_t i);
  static void index_rehash(GroupIndex& g, std::uint32_t capacity);

  bool earlier(const HeapEntry& a, const HeapEntry& b) const;
  void heap_push(TimeDomain domain, const HeapEntry& e);
  void heap_remove(TimeDomain domain, std::uint32_t pos);
  void sift_up(Heap& h, std::uint32_t pos);
  void sift_down(Heap& h, std::uint32_t pos);

  void release_record(std::uint32_t id);
  void compact_long_keys();

  std::vector<Record> records_;
  std::uint32_t free_head_;
  Heap heaps_[2];                        // by TimeDomain
  std::unique_ptr<GroupIndex[]> groups_; // one per key group of range_
  std::unique_ptr<detail::LongKeyStore> long_keys_;
  KeyGroupRange range_;
  std::uint32_t max_parallelism_;
  std::int64_t current_[2] = {std::numeric_limits<std::int64_t>::min(),
                              std::numeric_limits<std::int64_t>::min()};
  bool firing_ = false;
  std::string fired_key_;
};

} // namespace streamctl::state
