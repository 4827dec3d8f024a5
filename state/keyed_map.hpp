#pragma once
// KeyedMap<V>: the per-key state of one operator subtask, laid out by key group so that a
// snapshot writes one segment per key group (for_each_in_group) and a restore at another
// parallelism reads only the groups it owns (key_group.hpp).
//
// Layout. One open-addressing table per key group of the subtask's range, created on the first
// insert into the group. A slot holds the key's 64-bit hash, the key bytes and the value inline:
//
//   Slot: 8 bytes   hash (as given by the caller: hash_key_bytes of the key bytes)
//         16 bytes  key: up to 15 bytes inline plus a length byte; a longer key keeps its length
//                   and an offset into the group's long-key buffer (one buffer per group, not an
//                   allocation per key; erased keys leave garbage there that is compacted away
//                   when it is more than half of the buffer)
//         V         the value
//
// so a KeyedMap<std::int64_t> slot is 32 bytes and a lookup usually touches one cache line
// (slots are 64-byte aligned). The hash is compared before any key byte. Tables use Robin Hood
// linear probing, ordered by the high bits of the hash (the low bits pick the key group, so they
// are nearly constant within a group), which a multiply-shift turns into a home slot in a table
// of any capacity: a lookup of an absent key stops as soon as it meets a key that sits nearer
// its home slot. Erase uses backward-shift deletion (no tombstones). A table doubles when it
// becomes 80% full and shrinks when it falls below 10% (never below 8 slots); one reserved for a
// known number of entries (a restore) is sized for 75%.
//
// Change marks (incremental checkpoints, state/changed_entries.hpp): a 3-bit stamp per entry,
// kept in the key's tag byte so that it costs no memory and setting it touches only the slot the
// update touched already; it moves with the entry and is ignored by every lookup. An entry is
// marked when its stamp equals its group's mark epoch (1 to 7; stamp 0: never marked, as entries
// are made). try_emplace_marked stamps an entry with the epoch, unmark stamps it 0, and
// unmark_group moves the group to another epoch, which unmarks every entry at once: the epoch
// left is noted stale (entries may still carry it), and a scan of the table (stamping every
// entry 0) comes only when every epoch is stale, once in 7. Scanning at each unmark_group took
// 6% of the CPU of loading 3.3 M windows with incremental checkpoints (tests/bench/
// checkpoint.py), most of the extra time the task was held per checkpoint.
//
// A deferred take of changes (ChangedEntries::take_logs) moves a group to another epoch too
// (begin_pending), but leaves the epoch it left pending rather than stale: whoever resolves the
// take later (the snapshot writer's thread, or the task before it changes the group; the group
// is frozen meanwhile) finds each logged entry and clears its stamp (resolve_pending), so that
// no entry keeps it; a take given up without being resolved makes it stale (abandon_pending).
//
// References and pointers returned by get_or_insert/try_emplace/find stay valid until the next
// insert or erase in the map (both may move other entries); visiting functions must not insert
// or erase (erase_if does its own erasing). Iteration order is unspecified.
//
// V must be nothrow move-constructible; its destructor runs on erase, clear_group and
// destruction. Not thread-safe: one map belongs to one subtask thread; but for deferred
// snapshots (state/frozen_key_groups.hpp), where another thread reads one key group through the
// const for_each_in_group and group_size while this one changes others. Debug builds then check
// every change (set_write_check).

#include <algorithm>
#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "state/key_group.hpp"
#include "state/short_copy.hpp"
#include "state/table_memory.hpp"

namespace streamctl::state {

// Where a KeyedMap's slot arrays come from when not from allocate_table (a map built with one):
// deferred snapshots' copies of key groups reuse the memory of earlier copies, because on fresh
// pages the kernel's zeroing cost more than the copy itself (state/recycled_memory.hpp).
// Thread-safe: a copy is made on the task's thread and freed on the writer's.
class SlotMemory {
public:
  virtual ~SlotMemory() = default;
  virtual void* allocate(std::size_t bytes, std::align_val_t align) = 0;
  virtual void free(void* p, std::size_t bytes, std::align_val_t align) noexcept = 0;
};

// Asked before a KeyedMap changes a key group, or hands out a value that may be changed
// (KeyedMap::set_write_check; debug builds only): deferred snapshots assert there that the group
// is not frozen and still to be serialised (state/frozen_key_groups.hpp).
class KeyGroupWriteCheck {
public:
  virtual void check_write(std::uint32_t key_group) const = 0;

protected:
  ~KeyGroupWriteCheck() = default;
};

namespace detail {

// 16 bytes of key held in a slot: the key's bytes inline when it has at most 15, else the
// length and the offset into a LongKeyStore, each 4 bytes in host byte order (memory only,
// never written to a snapshot). Inline keys are zero-padded so that two equal keys are equal as
// 16 bytes, but for the change mark: bits 0x70 of the tag of an entry (never of tag_empty), which
// comparisons ignore. Tag: bit 7 set for an inline key, with its size in bits 3-0; 0x0F in bits
// 7 and 3-0 for a long key; bits 6-4 the mark stamp; 0 an empty slot, so that zeroed memory
// (fresh pages from the kernel: state/table_memory.hpp) is an empty table as it is.
struct StoredKey {
  static constexpr std::size_t inline_capacity = 15;
  static constexpr std::uint8_t tag_inline = 0x80; // | the size
  static constexpr std::uint8_t tag_long = 0x0F;
  static constexpr std::uint8_t tag_empty = 0x00;
  static constexpr std::uint8_t tag_stamp = 0x70; // the mark stamp, 0 to 7
  static constexpr unsigned stamp_shift = 4;

  char bytes[inline_capacity];
  std::uint8_t tag;

  bool empty() const { return tag == tag_empty; }
  bool is_long() const { return (tag & ~tag_stamp) == tag_long; }
  std::uint8_t inline_size() const { return static_cast<std::uint8_t>(tag & 0x0F); }
  // The mark stamp of an entry (not of an empty slot).
  std::uint8_t stamp() const { return static_cast<std::uint8_t>((tag & tag_stamp) >> stamp_shift); }
  void set_stamp(std::uint8_t s) {
    tag = static_cast<std::uint8_t>((tag & ~tag_stamp) | (s << stamp_shift));
  }
  std::uint32_t long_size() const {
    std::uint32_t v;
    std::memcpy(&v, bytes, 4);
    return v;
  }
  std::uint32_t long_offset() const {
    std::uint32_t v;
    std::memcpy(&v, bytes + 4, 4);
    return v;
  }
  void set_long(std::uint32_t size, std::uint32_t offset) {
    std::memset(bytes, 0, sizeof bytes);
    std::memcpy(bytes, &size, 4);
    std::memcpy(bytes + 4, &offset, 4);
    tag = tag_long;
  }
};
static_assert(sizeof(StoredKey) == 16);

// Key bytes longer than 15, appended one after another; erased keys become garbage until the
// owner compacts (rewrites the live keys into a fresh store and updates their offsets).
class LongKeyStore {
public:
  std::uint32_t add(std::string_view key) {
    STREAMCTL_STATE_ASSERT(bytes_.size() + key.size() <= UINT32_MAX,
                           "more than 4 GiB of long keys in one key group");
    auto offset = static_cast<std::uint32_t>(bytes_.size());
    bytes_.insert(bytes_.end(), key.begin(), key.end());
    return offset;
  }
  std::string_view get(std::uint32_t offset, std::uint32_t size) const {
    return {bytes_.data() + offset, size};
  }
  void release(std::uint32_t size) { garbage_ += size; }
  bool wants_compaction() const { return garbage_ >= 4096 && garbage_ * 2 >= bytes_.size(); }
  std::size_t memory_bytes() const { return sizeof(*this) + bytes_.capacity(); }
  void reserve(std::size_t bytes) { bytes_.reserve(bytes); }
  std::size_t live_bytes() const { return bytes_.size() - garbage_; }

private:
  std::vector<char> bytes_;
  std::size_t garbage_ = 0;
};

// A key being looked up, with its 16-byte inline image prepared once.
struct KeyProbe {
  explicit KeyProbe(std::string_view k) : key(k) {
    std::memset(&image, 0, sizeof image);
    if (k.size() <= StoredKey::inline_capacity) {
      copy_short(image.bytes, k.data(), k.size());
      image.tag = static_cast<std::uint8_t>(StoredKey::tag_inline | k.size());
    } else {
      image.tag = StoredKey::tag_long;
    }
  }
  bool is_inline() const { return image.tag != StoredKey::tag_long; }

  std::string_view key;
  StoredKey image;
};

inline bool key_matches(const StoredKey& stored, const KeyProbe& probe, const LongKeyStore* store) {
  if (probe.is_inline()) {
    // As 16 bytes, but for the mark stamp of the tag (byte 15: the top byte of the second word
    // on a little-endian host).
    constexpr std::uint64_t mark_bit = std::endian::native == std::endian::little
                                           ? std::uint64_t{StoredKey::tag_stamp} << 56
                                           : std::uint64_t{StoredKey::tag_stamp};
    std::uint64_t a[2], b[2];
    std::memcpy(a, &stored, sizeof a);
    std::memcpy(b, &probe.image, sizeof b);
    return a[0] == b[0] && ((a[1] ^ b[1]) & ~mark_bit) == 0;
  }
  return stored.is_long() && stored.long_size() == probe.key.size() &&
         std::memcmp(store->get(stored.long_offset(), stored.long_size()).data(), probe.key.data(),
                     probe.key.size()) == 0;
}

inline std::string_view key_view(const StoredKey& stored, const LongKeyStore* store) {
  if (stored.is_long()) return store->get(stored.long_offset(), stored.long_size());
  return {stored.bytes, stored.inline_size()};
}

// Stores the probe's key: inline, or appended to *store (created on first use).
inline StoredKey store_key(const KeyProbe& probe, std::unique_ptr<LongKeyStore>& store) {
  if (probe.is_inline()) return probe.image;
  if (!store) store = std::make_unique<LongKeyStore>();
  StoredKey k;
  k.set_long(static_cast<std::uint32_t>(probe.key.size()), store->add(probe.key));
  return k;
}

// Heap bytes owned by a value beyond sizeof(V), when the type can say.
template <typename V> std::size_t value_heap_bytes(const V& v) {
  if constexpr (std::is_same_v<V, std::string>) {
    return v.capacity() > 15 ? v.capacity() + 1 : 0;
  } else if constexpr (requires {
                         { v.heap_bytes() } -> std::convertible_to<std::size_t>;
                       }) {
    return v.heap_bytes();
  } else {
    return 0;
  }
}

template <typename V>
inline constexpr bool values_report_heap = std::is_same_v<V, std::string> || requires(const V& v) {
  { v.heap_bytes() } -> std::convertible_to<std::size_t>;
};

} // namespace detail

template <typename V> class KeyedMap {
  static_assert(std::is_nothrow_move_constructible_v<V>,
                "KeyedMap moves values between slots and needs a noexcept move constructor");

public:
  // The state of the subtask that owns `range` of key groups [0, max_parallelism). `memory`
  // (optional; it must outlive the map) provides the slot arrays instead of allocate_table (state/table_memory.hpp).
  KeyedMap(KeyGroupRange range, std::uint32_t max_parallelism, SlotMemory* memory = nullptr)
      : range_(range), max_parallelism_(max_parallelism), memory_(memory) {
    STREAMCTL_STATE_ASSERT(max_parallelism >= 1 && max_parallelism <= max_key_groups,
                           "max_parallelism must be in [1, 32768]");
    STREAMCTL_STATE_ASSERT(range.first <= range.end && range.end <= max_parallelism,
                           "key group range outside [0, max_parallelism)");
    groups_ = std::make_unique<Group[]>(range.size());
  }
  ~KeyedMap() { release_all(); }

  KeyedMap(const KeyedMap&) = delete;
  KeyedMap& operator=(const KeyedMap&) = delete;
  KeyedMap(KeyedMap&& other) noexcept
      : groups_(std::move(other.groups_)), range_(std::exchange(other.range_, {})),
        max_parallelism_(other.max_parallelism_), group_of_(other.group_of_),
        size_(std::exchange(other.size_, 0)), memory_(other.memory_) {}
  KeyedMap& operator=(KeyedMap&& other) noexcept {
    if (this != &other) {
      release_all();
      groups_ = std::move(other.groups_);
      range_ = std::exchange(other.range_, {});
      max_parallelism_ = other.max_parallelism_;
      group_of_ = other.group_of_;
      size_ = std::exchange(other.size_, 0);
      memory_ = other.memory_;
    }
    return *this;
  }

  KeyGroupRange key_group_range() const { return range_; }
  // The key group an entry filed under `hash` belongs to.
  std::uint32_t key_group_of(std::uint64_t hash) const { return group_of_(hash); }
  std::uint32_t max_parallelism() const { return max_parallelism_; }

  // Debug builds: `check` (which must outlive the map, or be reset) is asked before every change
  // to a key group: inserts, erases, marks, adoption, clearing, and the non-const find and
  // visits, which hand out values that may be changed. Release builds never ask.
  void set_write_check(const KeyGroupWriteCheck* check) { write_check_ = check; }

  // The value of `key` (whose hash_key_bytes is `hash`), value-initialised when new.
  V& get_or_insert(std::string_view key, std::uint64_t hash, bool* inserted = nullptr) {
    auto [value, was_inserted] = try_emplace(key, hash);
    if (inserted != nullptr) *inserted = was_inserted;
    return *value;
  }

  // The value of `key`, constructed from `args` when the key is new ({value, inserted}).
  template <typename... Args>
  std::pair<V*, bool> try_emplace(std::string_view key, std::uint64_t hash, Args&&... args) {
    check_write_hash(hash);
    auto [slot, inserted] = emplace_slot(key, hash, std::forward<Args>(args)...);
    return {&slot->value, inserted};
  }

  // try_emplace() without arguments that also marks the entry; `newly_marked` tells whether it
  // was unmarked before (a new entry always was).
  std::pair<V*, bool> try_emplace_marked(std::string_view key, std::uint64_t hash, bool& newly_marked) {
    check_write_hash(hash);
    Group& g = group_for(hash);
    auto [slot, inserted] = emplace_slot(g, key, hash);
    newly_marked = slot->key.stamp() != g.epoch;
    slot->key.set_stamp(g.epoch);
    return {&slot->value, inserted};
  }

  // Clears the mark of `key`: nullopt when the key is absent, else whether it was marked.
  std::optional<bool> unmark(std::string_view key, std::uint64_t hash) {
    check_write_hash(hash);
    Group& g = group_for(hash);
    std::uint32_t i = find_index(g, detail::KeyProbe(key), hash);
    if (i == npos) return std::nullopt;
    const bool was = g.slots[i].key.stamp() == g.epoch;
    g.slots[i].key.set_stamp(0);
    return was;
  }
  // unmark() that also gives the entry (nullptr: absent) for a caller that reads it in the same
  // probe: a checkpoint copies the changed entries it unmarks (operators/window.cpp).
  V* unmark_find(std::string_view key, std::uint64_t hash, bool& was_marked) {
    check_write_hash(hash);
    Group& g = group_for(hash);
    std::uint32_t i = find_index(g, detail::KeyProbe(key), hash);
    if (i == npos) return nullptr;
    was_marked = g.slots[i].key.stamp() == g.epoch;
    g.slots[i].key.set_stamp(0);
    return &g.slots[i].value;
  }
  // Clears the mark of every entry of `key_group`: another epoch, which no entry is stamped
  // with (the one left becomes stale); when every epoch is stale, a scan stamps them all 0.
  void unmark_group(std::uint32_t key_group) {
    check_write(key_group);
    Group& g = group_at(key_group);
    g.stale = static_cast<std::uint8_t>(g.stale | epoch_bit(g.epoch));
    if (const std::uint8_t e = free_epoch(g)) {
      g.epoch = e;
      return;
    }
    for (std::uint32_t i = 0; i < g.capacity(); ++i)
      if (!g.slots[i].key.empty()) g.slots[i].key.set_stamp(0);
    g.stale = 0;
    g.epoch = 1;
  }
  // A deferred take of `key_group`'s changes: the group moves to another epoch, and the entries
  // marked now keep the epoch returned (pending) until resolve_pending clears each. 0 when no
  // epoch is free (too many stale ones): then unmark_group instead, and write the group whole.
  std::uint8_t begin_pending(std::uint32_t key_group) {
    check_write(key_group);
    Group& g = group_at(key_group);
    const std::uint8_t pending = g.epoch;
    const std::uint8_t e = free_epoch(g);
    if (e != 0) g.epoch = e;
    return e != 0 ? pending : 0;
  }
  // The entry of `key` (nullptr: absent), and whether it was stamped `pending`, a stamp then
  // cleared. For the thread that resolves a deferred take while the group is frozen
  // (state/frozen_key_groups.hpp): the write check is not asked, which would find the group
  // unsettled, as it is until the take is resolved.
  const V* resolve_pending(std::string_view key, std::uint64_t hash, std::uint8_t pending, bool& was_pending) {
    Group& g = group_for(hash);
    std::uint32_t i = find_index(g, detail::KeyProbe(key), hash);
    if (i == npos) return nullptr;
    was_pending = g.slots[i].key.stamp() == pending;
    if (was_pending) g.slots[i].key.set_stamp(0);
    return &g.slots[i].value;
  }
  // A deferred take of `key_group` will not be resolved: its entries may keep `pending`.
  void abandon_pending(std::uint32_t key_group, std::uint8_t pending) {
    check_write(key_group);
    Group& g = group_at(key_group);
    g.stale = static_cast<std::uint8_t>(g.stale | epoch_bit(pending));
  }
  bool marked(std::string_view key, std::uint64_t hash) const {
    const Group& g = groups_[group_index(hash)];
    std::uint32_t i = find_index(g, detail::KeyProbe(key), hash);
    return i != npos && g.slots[i].key.stamp() == g.epoch;
  }

  V* find(std::string_view key, std::uint64_t hash) {
    check_write_hash(hash);
    Group& g = group_for(hash);
    std::uint32_t i = find_index(g, detail::KeyProbe(key), hash);
    return i == npos ? nullptr : &g.slots[i].value;
  }
  const V* find(std::string_view key, std::uint64_t hash) const {
    const Group& g = groups_[group_index(hash)];
    std::uint32_t i = find_index(g, detail::KeyProbe(key), hash);
    return i == npos ? nullptr : &g.slots[i].value;
  }
  bool contains(std::string_view key, std::uint64_t hash) const {
    return find(key, hash) != nullptr;
  }

  bool erase(std::string_view key, std::uint64_t hash) {
    check_write_hash(hash);
    Group& g = group_for(hash);
    std::uint32_t i = find_index(g, detail::KeyProbe(key), hash);
    if (i == npos) return false;
    erase_at(g, i);
    after_erase(g);
    return true;
  }

  // Starts loading the slot where `hash` would be. An operator that hashes the keys of a batch
  // first and prefetches them a few records ahead overlaps the cache misses of many updates
  // (tests/bench/keyed_state_bench: 4x the updates/s at a million keys, 1.7x at 100k).
  void prefetch(std::uint64_t hash) const {
    const Group& g = groups_[group_index(hash)];
    if (g.slots == nullptr) return;
    // A Robin Hood probe at 80% load reads about three slots: with 32-byte slots that is the
    // home line and, about half the time, the next one (a miss there took a quarter of a
    // dense window count's CPU when only the home line was loaded).
    constexpr std::uint32_t slots_per_line = sizeof(Slot) >= 64 ? 1 : 64 / sizeof(Slot);
    const std::uint32_t home = g.home(hash);
    __builtin_prefetch(&g.slots[home]);
    const std::uint32_t next_line = home + slots_per_line;
    __builtin_prefetch(&g.slots[next_line < g.cap ? next_line : next_line - g.cap]); // wraps as a probe does
  }

  // Finds each of `probes` (key bytes, hash), in order, calling f(i, const V* or nullptr) for
  // probes[i], the slot of the probe a few ahead prefetched first: a checkpoint's deltas look
  // up keys at random places of tables that may hold gigabytes, and started ahead, their cache
  // misses overlap (this runs at the barrier, holding the task).
  static constexpr std::size_t find_prefetch_distance = 8;
  template <typename F>
  void find_each(const std::vector<std::pair<std::string_view, std::uint64_t>>& probes, F&& f) const {
    for (std::size_t i = 0; i < probes.size(); ++i) {
      if (i + find_prefetch_distance < probes.size()) prefetch(probes[i + find_prefetch_distance].second);
      f(i, find(probes[i].first, probes[i].second));
    }
  }

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::size_t group_size(std::uint32_t key_group) const { return group_at(key_group).size; }
  // The bytes of one key group's slot table (0 when it has none): what copy_group_into asks
  // the target's SlotMemory for, with table_align().
  std::size_t group_table_bytes(std::uint32_t key_group) const {
    return sizeof(Slot) * group_at(key_group).capacity();
  }
  static constexpr std::align_val_t table_align() { return slot_align; }

  // Heap bytes held: slot tables, long-key buffers, the group directory, and what values own
  // when V is std::string or has `std::size_t heap_bytes() const` (then O(size()), else
  // O(groups)). Allocator overhead is not counted.
  std::size_t memory_bytes() const {
    std::size_t bytes = sizeof(Group) * range_.size();
    for (std::uint32_t k = 0; k < range_.size(); ++k) {
      const Group& g = groups_[k];
      bytes += g.capacity() * sizeof(Slot);
      if (g.long_keys) bytes += g.long_keys->memory_bytes();
    }
    if constexpr (detail::values_report_heap<V>)
      for_each([&](std::string_view, const V& v) { bytes += detail::value_heap_bytes(v); });
    return bytes;
  }

  // Visits every (key bytes, value). `f` must not insert or erase.
  template <typename F> void for_each(F&& f) {
    for (std::uint32_t kg = range_.first; kg < range_.end; ++kg)
      for_each_in_group(kg, f);
  }
  template <typename F> void for_each(F&& f) const {
    for (std::uint32_t kg = range_.first; kg < range_.end; ++kg)
      for_each_in_group(kg, f);
  }

  // Visits the (key bytes, value) of one key group: what a snapshot writes for the group.
  template <typename F> void for_each_in_group(std::uint32_t key_group, F&& f) {
    for_each_hashed_in_group(key_group, [&f](std::string_view key, std::uint64_t, V& value) { f(key, value); });
  }
  // The same with each key's stored hash: f(key bytes, hash, value&), for a caller that hands
  // the keys on to what hashes them again (a combiner's partials, routed by key).
  template <typename F> void for_each_hashed_in_group(std::uint32_t key_group, F&& f) {
    check_write(key_group);
    Group& g = group_at(key_group);
    const detail::LongKeyStore* store = g.long_keys.get();
    for (std::uint32_t i = 0; i < g.capacity(); ++i) {
      Slot& s = g.slots[i];
      if (!s.key.empty()) f(detail::key_view(s.key, store), s.hash, s.value);
    }
  }
  // Reads only: deferred snapshots call it on another thread (see the top of the file).
  template <typename F> void for_each_in_group(std::uint32_t key_group, F&& f) const {
    const Group& g = group_at(key_group);
    const detail::LongKeyStore* store = g.long_keys.get();
    for (std::uint32_t i = 0; i < g.capacity(); ++i) {
      const Slot& s = g.slots[i];
      if (!s.key.empty()) f(detail::key_view(s.key, store), std::as_const(s.value));
    }
  }

  // Erases the entries of one key group for which pred(key bytes, value&) is true, visiting
  // each entry once; returns how many were erased. `pred` must not insert or erase.
  template <typename P> std::size_t erase_if_in_group(std::uint32_t key_group, P&& pred) {
    check_write(key_group);
    Group& g = group_at(key_group);
    if (g.size == 0) return 0;
    // Start after an empty slot (there is one: tables are at most 80% full). Backward shifts
    // then only move entries not yet visited into the slot being visited, never across it.
    std::uint32_t start = 0;
    while (!g.slots[start].key.empty())
      ++start;
    std::size_t erased = 0;
    std::uint32_t i = g.next(start);
    while (i != start) {
      Slot& s = g.slots[i];
      if (!s.key.empty() && pred(detail::key_view(s.key, g.long_keys.get()), s.value)) {
        erase_at(g, i); // an unvisited entry may now be in slot i: look at it again
        ++erased;
      } else {
        i = g.next(i);
      }
    }
    if (erased > 0) after_erase(g);
    return erased;
  }
  template <typename P> std::size_t erase_if(P&& pred) {
    std::size_t erased = 0;
    for (std::uint32_t kg = range_.first; kg < range_.end; ++kg)
      erased += erase_if_in_group(kg, pred);
    return erased;
  }

  // Makes room in `key_group`'s table for `entries` in all, so that inserting them does not
  // grow it step by step (a restore knows how many a group holds).
  void reserve_group(std::uint32_t key_group, std::size_t entries) {
    check_write(key_group);
    Group& g = group_at(key_group);
    if (entries > g.grow_at) rehash(g, capacity_for(entries));
  }

  // Moves the table of `key_group` out of `from` (a map of the same max_parallelism whose
  // range holds the group, filled apart: a restore builds groups on helper threads) into this
  // map, whose group must be empty. O(1): nothing is copied or rehashed.
  void adopt_group(std::uint32_t key_group, KeyedMap& from) {
    STREAMCTL_STATE_ASSERT(from.max_parallelism_ == max_parallelism_,
                           "adopting a key group of another max_parallelism");
    STREAMCTL_STATE_ASSERT(from.memory_ == memory_, "adopting slots of another memory source");
    check_write(key_group);
    from.check_write(key_group);
    Group& to = group_at(key_group);
    STREAMCTL_STATE_ASSERT(to.size == 0, "adopting into a key group that holds entries");
    Group& g = from.group_at(key_group);
    release(to);
    to.slots = std::exchange(g.slots, nullptr);
    to.cap = std::exchange(g.cap, 0);
    to.size = std::exchange(g.size, 0);
    to.grow_at = std::exchange(g.grow_at, 0);
    to.epoch = std::exchange(g.epoch, 1);
    to.stale = std::exchange(g.stale, 0);
    to.long_keys = std::move(g.long_keys);
    size_ += to.size;
    from.size_ -= to.size;
  }

  // Copies the table of `key_group` into `to` (a map of the same max_parallelism whose range
  // holds the group, and whose group is empty): slots and long keys as bytes, with their change
  // marks, so that the copy reads as the group did. For values that are plain bytes only. A
  // deferred snapshot copies a frozen group this way before the task changes it, which costs a
  // memcpy of the table where serialising it cost a pass over every entry
  // (state/frozen_key_groups.hpp). Reads this map only: safe while another thread reads it too.
  void copy_group_into(std::uint32_t key_group, KeyedMap& to) const
    requires std::is_trivially_copyable_v<V>
  {
    STREAMCTL_STATE_ASSERT(to.max_parallelism_ == max_parallelism_,
                           "copying a key group into a map of another max_parallelism");
    to.check_write(key_group);
    const Group& g = group_at(key_group);
    Group& copy = to.group_at(key_group);
    STREAMCTL_STATE_ASSERT(copy.size == 0, "copying into a key group that holds entries");
    to.release(copy);
    if (g.slots == nullptr) return;
    copy.slots = static_cast<Slot*>(to.allocate_bytes(sizeof(Slot) * g.capacity()));
    for (std::uint32_t i = 0; i < g.capacity(); ++i)
      ::new (static_cast<void*>(&copy.slots[i])) Slot(); // initialises nothing: a no-op
    std::memcpy(static_cast<void*>(copy.slots), g.slots, sizeof(Slot) * g.capacity());
    copy.cap = g.cap;
    copy.size = g.size;
    copy.grow_at = g.grow_at;
    copy.epoch = g.epoch;
    copy.stale = g.stale;
    if (g.long_keys) copy.long_keys = std::make_unique<detail::LongKeyStore>(*g.long_keys);
    to.size_ += copy.size;
  }

  // Erases every entry of one key group and frees its table.
  void clear_group(std::uint32_t key_group) {
    check_write(key_group);
    Group& g = group_at(key_group);
    size_ -= g.size;
    release(g);
  }
  void clear() {
    for (std::uint32_t k = 0; k < range_.size(); ++k) {
      check_write(range_.first + k);
      release(groups_[k]);
    }
    size_ = 0;
  }

private:
  struct Slot {
    std::uint64_t hash;
    detail::StoredKey key;
    union {
      V value; // constructed only while !key.empty()
    };
    Slot() {}
    ~Slot() {}
  };

  struct Group {
    Slot* slots = nullptr;     // cap slots, or nullptr
    std::uint32_t cap = 0;     // any number of slots (0 without a table)
    std::uint32_t size = 0;
    std::uint32_t grow_at = 0; // size that triggers doubling (80% of capacity)
    std::uint8_t epoch = 1;    // entries stamped with it are marked (1 to max_epoch)
    std::uint8_t stale = 0;    // bit e: entries may still carry epoch e, from before (epoch_bit)
    std::unique_ptr<detail::LongKeyStore> long_keys;

    std::uint32_t capacity() const { return cap; }
    // The high 32 bits of the hash scaled to [0, cap) (a multiply and a shift, Lemire's
    // "fastrange"): monotonic in the hash, as Robin Hood order needs, and any capacity works,
    // so that a table sized for a restore is not rounded up to a power of two (at 49% load,
    // as 257 k entries a group made, the kernel spent a third of a restore clearing pages).
    std::uint32_t home(std::uint64_t hash) const {
      return static_cast<std::uint32_t>(((hash >> 32) * cap) >> 32);
    }
    std::uint32_t next(std::uint32_t i) const { return i + 1 == cap ? 0 : i + 1; }
    std::uint32_t prev(std::uint32_t i) const { return i == 0 ? cap - 1 : i - 1; }
    std::uint32_t distance(std::uint32_t i) const {
      const std::uint32_t h = home(slots[i].hash);
      return i >= h ? i - h : i + cap - h;
    }
  };

  static constexpr std::uint32_t npos = UINT32_MAX;
  static constexpr std::uint32_t min_capacity = 8;
  static constexpr std::uint8_t max_epoch = detail::StoredKey::tag_stamp >> detail::StoredKey::stamp_shift;
  static constexpr std::uint8_t epoch_bit(std::uint8_t e) { return static_cast<std::uint8_t>(1u << (e - 1)); }
  // The first epoch after g's current one (cyclically, never the current one) that is not
  // stale; 0: none.
  static std::uint8_t free_epoch(const Group& g) {
    for (std::uint8_t step = 1; step < max_epoch; ++step) {
      const auto e = static_cast<std::uint8_t>((g.epoch - 1 + step) % max_epoch + 1);
      if (!(g.stale & epoch_bit(e))) return e;
    }
    return 0;
  }
  static constexpr std::align_val_t slot_align{alignof(Slot) > 64 ? alignof(Slot) : 64};

  void check_write([[maybe_unused]] std::uint32_t key_group) const {
#ifndef NDEBUG
    if (write_check_ != nullptr) write_check_->check_write(key_group);
#endif
  }
  void check_write_hash([[maybe_unused]] std::uint64_t hash) const {
#ifndef NDEBUG
    if (write_check_ != nullptr) write_check_->check_write(group_of_(hash));
#endif
  }

  std::uint32_t group_index(std::uint64_t hash) const {
    std::uint32_t kg = group_of_(hash);
    STREAMCTL_STATE_ASSERT(range_.contains(kg),
                           "key of a key group outside this map's range (wrong routing?)");
    return kg - range_.first;
  }
  Group& group_for(std::uint64_t hash) { return groups_[group_index(hash)]; }
  Group& group_at(std::uint32_t key_group) {
    STREAMCTL_STATE_ASSERT(range_.contains(key_group), "key group outside this map's range");
    return groups_[key_group - range_.first];
  }
  const Group& group_at(std::uint32_t key_group) const {
    return const_cast<KeyedMap*>(this)->group_at(key_group);
  }

  static std::uint32_t find_index(const Group& g, const detail::KeyProbe& probe,
                                  std::uint64_t hash) {
    if (g.size == 0) return npos;
    std::uint32_t i = g.home(hash);
    for (std::uint32_t d = 0;; ++d, i = g.next(i)) {
      const Slot& s = g.slots[i];
      if (s.key.empty()) return npos;
      if (s.hash == hash) {
        if (detail::key_matches(s.key, probe, g.long_keys.get())) return i;
      } else if (g.distance(i) < d) {
        return npos; // Robin Hood: the key would have displaced this entry
      }
    }
  }

  template <typename... Args>
  std::pair<Slot*, bool> emplace_slot(std::string_view key, std::uint64_t hash, Args&&... args) {
    return emplace_slot(group_for(hash), key, hash, std::forward<Args>(args)...);
  }
  template <typename... Args>
  std::pair<Slot*, bool> emplace_slot(Group& g, std::string_view key, std::uint64_t hash, Args&&... args) {
    detail::KeyProbe probe(key);
    if (std::uint32_t i = find_index(g, probe, hash); i != npos) return {&g.slots[i], false};
    if constexpr (std::is_nothrow_constructible_v<V, Args...>) {
      Slot& s = insert_slot(g, probe, hash);
      ::new (static_cast<void*>(&s.value)) V(std::forward<Args>(args)...);
      return {&s, true};
    } else {
      V made(std::forward<Args>(args)...); // may throw: nothing changed yet
      Slot& s = insert_slot(g, probe, hash);
      ::new (static_cast<void*>(&s.value)) V(std::move(made));
      return {&s, true};
    }
  }

  // Makes room for a key known to be absent and stores hash and key; the caller constructs the
  // value. Everything that can throw happens before the table changes.
  Slot& insert_slot(Group& g, const detail::KeyProbe& probe, std::uint64_t hash) {
    if (g.size + 1 > g.grow_at) rehash(g, g.capacity() == 0 ? min_capacity : g.capacity() * 2);
    detail::StoredKey key = detail::store_key(probe, g.long_keys);
    Slot& s = place(g, hash);
    s.hash = hash;
    s.key = key;
    ++g.size;
    ++size_;
    return s;
  }

  static void move_slot(Slot& to, Slot& from) noexcept {
    to.hash = from.hash;
    to.key = from.key;
    ::new (static_cast<void*>(&to.value)) V(std::move(from.value));
    from.value.~V();
  }

  // Returns the slot where an entry with `hash` belongs, emptied by shifting the rest of its
  // cluster one slot on (entries stay ordered by home slot). Its key is left marked empty.
  static Slot& place(Group& g, std::uint64_t hash) {
    std::uint32_t i = g.home(hash);
    for (std::uint32_t d = 0; !g.slots[i].key.empty() && g.distance(i) >= d; ++d)
      i = g.next(i);
    if (!g.slots[i].key.empty()) {
      std::uint32_t j = i;
      while (!g.slots[j].key.empty())
        j = g.next(j);
      while (j != i) {
        std::uint32_t prev = g.prev(j);
        move_slot(g.slots[j], g.slots[prev]);
        j = prev;
      }
      g.slots[i].key.tag = detail::StoredKey::tag_empty;
    }
    return g.slots[i];
  }

  void erase_at(Group& g, std::uint32_t i) {
    Slot* s = &g.slots[i];
    s->value.~V();
    if (s->key.is_long()) g.long_keys->release(s->key.long_size());
    for (std::uint32_t next = g.next(i); !g.slots[next].key.empty() && g.distance(next) > 0;
         next = g.next(next)) {
      move_slot(*s, g.slots[next]);
      s = &g.slots[next];
    }
    s->key.tag = detail::StoredKey::tag_empty;
    --g.size;
    --size_;
  }

  // Shrinks a sparse table and compacts a long-key buffer that is mostly garbage.
  void after_erase(Group& g) {
    if (g.capacity() > min_capacity && std::size_t{g.size} * 10 < g.capacity())
      rehash(g, capacity_for(g.size * 2));
    if (g.long_keys && g.long_keys->live_bytes() == 0)
      g.long_keys.reset();
    else if (g.long_keys && g.long_keys->wants_compaction())
      compact_long_keys(g);
  }

  // A capacity that holds n entries at about 75% load (at least 8): below the 80% that makes a
  // table grow, so that a table reserved for a restore takes a few inserts more before it
  // doubles, with probes not much longer than at the 40-80% of doubling. Rounded up to a size
  // class (its top four bits only: at most 1/8 more), so that the groups of one operator, of
  // about the same size, have tables of the same size: a deferred snapshot's copies of them
  // then reuse each other's memory (state/recycled_memory.hpp, which matches sizes exactly; with
  // a capacity per group, every copy took fresh pages for the kernel to clear, 13% of a 1 GB
  // job's CPU).
  static std::uint32_t capacity_for(std::size_t n) {
    std::size_t cap = std::max<std::size_t>(min_capacity, (n * 4 + 2) / 3);
    const int width = std::bit_width(cap);
    const std::size_t step = width > 4 ? std::size_t{1} << (width - 4) : 1;
    cap = (cap + step - 1) / step * step;
    STREAMCTL_STATE_ASSERT(cap <= (std::size_t{1} << 31), "key group table too large");
    return static_cast<std::uint32_t>(cap);
  }

  void* allocate_bytes(std::size_t bytes) {
    return memory_ != nullptr ? memory_->allocate(bytes, slot_align) : allocate_table(bytes, slot_align);
  }
  // Empty slots: all zero bytes (tag_empty is 0). A large table from allocate_zeroed_table is
  // fresh pages, zero already: a restore then writes each of its bytes once, not twice.
  Slot* allocate_slots(std::uint32_t capacity) {
    const std::size_t bytes = sizeof(Slot) * capacity;
    void* raw = memory_ != nullptr ? memory_->allocate(bytes, slot_align) : allocate_zeroed_table(bytes, slot_align);
    Slot* slots = static_cast<Slot*>(raw);
    for (std::uint32_t i = 0; i < capacity; ++i) ::new (static_cast<void*>(&slots[i])) Slot(); // writes nothing
    // After the constructors: GCC drops stores made before an object's constructor runs.
    if (memory_ != nullptr) std::memset(raw, 0, bytes);
    return slots;
  }

  void free_slots(Slot* slots, std::uint32_t capacity) {
    for (std::uint32_t i = 0; i < capacity; ++i) {
      if (!slots[i].key.empty()) slots[i].value.~V();
      slots[i].~Slot();
    }
    if (memory_ != nullptr) memory_->free(slots, sizeof(Slot) * capacity, slot_align);
    else free_table(static_cast<void*>(slots), sizeof(Slot) * capacity, slot_align);
  }

  void rehash(Group& g, std::uint32_t capacity) {
    Group fresh;
    fresh.slots = allocate_slots(capacity);
    fresh.cap = capacity;
    std::uint32_t old_capacity = g.capacity();
    for (std::uint32_t i = 0; i < old_capacity; ++i) {
      Slot& from = g.slots[i];
      if (from.key.empty()) continue;
      move_slot(place(fresh, from.hash), from);
      from.key.tag = detail::StoredKey::tag_empty;
    }
    if (g.slots != nullptr) free_slots(g.slots, old_capacity);
    g.slots = fresh.slots;
    g.cap = fresh.cap;
    g.grow_at = static_cast<std::uint32_t>(std::size_t{capacity} * 4 / 5);
    fresh.slots = nullptr;
  }

  void compact_long_keys(Group& g) {
    auto fresh = std::make_unique<detail::LongKeyStore>();
    fresh->reserve(g.long_keys->live_bytes());
    for (std::uint32_t i = 0; i < g.capacity(); ++i) {
      detail::StoredKey& k = g.slots[i].key;
      if (!k.is_long()) continue;
      std::string_view bytes = g.long_keys->get(k.long_offset(), k.long_size());
      const std::uint8_t stamp = k.stamp();
      k.set_long(k.long_size(), fresh->add(bytes));
      k.set_stamp(stamp);
    }
    g.long_keys = std::move(fresh);
  }

  void release(Group& g) {
    if (g.slots != nullptr) free_slots(g.slots, g.capacity());
    g.slots = nullptr;
    g.cap = 0;
    g.size = 0;
    g.grow_at = 0;
    g.epoch = 1;
    g.stale = 0;
    g.long_keys.reset();
  }

  void release_all() {
    if (!groups_) return;
    for (std::uint32_t k = 0; k < range_.size(); ++k)
      release(groups_[k]);
  }

  std::unique_ptr<Group[]> groups_; // one per key group of range_
  KeyGroupRange range_;
  std::uint32_t max_parallelism_;
  KeyGroupOf group_of_{max_parallelism_};
  std::size_t size_ = 0;
  const KeyGroupWriteCheck* write_check_ = nullptr; // asked in debug builds only
  SlotMemory* memory_ = nullptr;                    // nullptr: allocate_table
};

} // namespace streamctl::state
