#include "state/timer_service.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <new>
#include <utility>

namespace streamctl::state {

namespace {

constexpr std::uint32_t npos = UINT32_MAX;
constexpr std::uint32_t min_index_capacity = 8;

// 32 bits of a hash of the whole timer. Only in memory, so it may change between versions.
std::uint32_t fingerprint_of(TimeDomain domain, std::uint64_t hash, std::int64_t timestamp,
                             std::int64_t tag) {
  std::uint64_t x = hash ^ (static_cast<std::uint64_t>(timestamp) * 0x9E3779B97F4A7C15ULL) ^
                    (static_cast<std::uint64_t>(tag) * 0xC2B2AE3D27D4EB4FULL) ^
                    static_cast<std::uint64_t>(domain);
  // MurmurHash3's fmix64.
  x ^= x >> 33;
  x *= 0xFF51AFD7ED558CCDULL;
  x ^= x >> 33;
  x *= 0xC4CEB9FE1A85EC53ULL;
  x ^= x >> 33;
  return static_cast<std::uint32_t>(x >> 32);
}

} // namespace

TimerService::TimerService(KeyGroupRange range, std::uint32_t max_parallelism)
    : free_head_(npos), range_(range), max_parallelism_(max_parallelism) {
  STREAMCTL_STATE_ASSERT(max_parallelism >= 1 && max_parallelism <= max_key_groups,
                         "max_parallelism must be in [1, 32768]");
  STREAMCTL_STATE_ASSERT(range.first <= range.end && range.end <= max_parallelism,
                         "key group range outside [0, max_parallelism)");
  groups_ = std::make_unique<GroupIndex[]>(range.size());
}

TimerService::~TimerService() = default;

TimerService::TimerService(TimerService&& other) noexcept
    : records_(std::move(other.records_)), free_head_(std::exchange(other.free_head_, npos)),
      groups_(std::move(other.groups_)), long_keys_(std::move(other.long_keys_)),
      range_(std::exchange(other.range_, {})), max_parallelism_(other.max_parallelism_),
      fired_key_(std::move(other.fired_key_)) {
  for (int d = 0; d < 2; ++d) {
    heaps_[d] = std::move(other.heaps_[d]);
    current_[d] = other.current_[d];
  }
}

TimerService& TimerService::operator=(TimerService&& other) noexcept {
  if (this != &other) {
    records_ = std::move(other.records_);
    free_head_ = std::exchange(other.free_head_, npos);
    groups_ = std::move(other.groups_);
    long_keys_ = std::move(other.long_keys_);
    range_ = std::exchange(other.range_, {});
    max_parallelism_ = other.max_parallelism_;
    fired_key_ = std::move(other.fired_key_);
    for (int d = 0; d < 2; ++d) {
      heaps_[d] = std::move(other.heaps_[d]);
      current_[d] = other.current_[d];
    }
  }
  return *this;
}

TimerService::GroupIndex& TimerService::group_for(std::uint64_t hash) {
  std::uint32_t kg = key_group_of(hash, max_parallelism_);
  STREAMCTL_STATE_ASSERT(range_.contains(kg),
                         "timer of a key group outside this service's range (wrong routing?)");
  return groups_[kg - range_.first];
}

TimerService::GroupIndex& TimerService::group_at(std::uint32_t key_group) {
  STREAMCTL_STATE_ASSERT(range_.contains(key_group), "key group outside this service's range");
  return groups_[key_group - range_.first];
}

const TimerService::GroupIndex& TimerService::group_at(std::uint32_t key_group) const {
  return const_cast<TimerService*>(this)->group_at(key_group);
}

TimerView TimerService::view(std::uint32_t id) const {
  const Record& r = records_[id];
  return TimerView{r.domain, detail::key_view(r.key, long_keys_.get()), r.hash, r.timestamp, r.tag};
}

std::optional<std::int64_t> TimerService::next(TimeDomain domain) const {
  const auto& h = heap(domain);
  if (h.empty()) return std::nullopt;
  return h[0].timestamp;
}

std::size_t TimerService::memory_bytes() const {
  std::size_t bytes = records_.capacity() * sizeof(Record) + heaps_[0].memory_bytes() +
                      heaps_[1].memory_bytes() + range_.size() * sizeof(GroupIndex) +
                      fired_key_.capacity();
  for (std::uint32_t k = 0; k < range_.size(); ++k)
    bytes += groups_[k].capacity() * sizeof(IndexSlot);
  if (long_keys_) bytes += long_keys_->memory_bytes();
  return bytes;
}

// --- the per-group index: Robin Hood linear probing on the fingerprint's high bits ---------

std::uint32_t TimerService::find_slot(const GroupIndex& g, std::uint32_t fingerprint,
                                      TimeDomain domain, const detail::KeyProbe& probe,
                                      std::uint64_t hash, std::int64_t timestamp,
                                      std::int64_t tag) const {
  if (g.size == 0) return npos;
  std::uint32_t i = g.home(fingerprint);
  for (std::uint32_t d = 0;; ++d, i = (i + 1) & g.mask) {
    const IndexSlot& s = g.slots[i];
    if (s.id_plus_one == 0) return npos;
    if (s.fingerprint == fingerprint) {
      const Record& r = records_[s.id_plus_one - 1];
      if (r.timestamp == timestamp && r.hash == hash && r.tag == tag && r.domain == domain &&
          detail::key_matches(r.key, probe, long_keys_.get()))
        return i;
    } else if (g.distance(i) < d) {
      return npos;
    }
  }
}

std::uint32_t TimerService::find_slot_of(const GroupIndex& g, std::uint32_t fingerprint,
                                         std::uint32_t id) const {
  std::uint32_t i = g.home(fingerprint);
  while (g.slots[i].id_plus_one != id + 1)
    i = (i + 1) & g.mask;
  return i;
}

void TimerService::index_place(GroupIndex& g, std::uint32_t fingerprint, std::uint32_t id) {
  std::uint32_t i = g.home(fingerprint);
  for (std::uint32_t d = 0; g.slots[i].id_plus_one != 0 && g.distance(i) >= d; ++d)
    i = (i + 1) & g.mask;
  if (g.slots[i].id_plus_one != 0) { // shift the rest of the cluster one slot on
    std::uint32_t j = i;
    while (g.slots[j].id_plus_one != 0)
      j = (j + 1) & g.mask;
    for (; j != i; j = (j - 1) & g.mask)
      g.slots[j] = g.slots[(j - 1) & g.mask];
  }
  g.slots[i] = IndexSlot{id + 1, fingerprint};
  ++g.size;
}

void TimerService::index_erase_at(GroupIndex& g, std::uint32_t i) {
  for (std::uint32_t next = (i + 1) & g.mask;
       g.slots[next].id_plus_one != 0 && g.distance(next) > 0; next = (next + 1) & g.mask) {
    g.slots[i] = g.slots[next];
    i = next;
  }
  g.slots[i] = IndexSlot{0, 0};
  --g.size;
  if (g.capacity() > min_index_capacity && std::size_t{g.size} * 10 < g.capacity()) {
    std::uint32_t cap = min_index_capacity;
    while (std::size_t{g.size} * 2 * 5 > std::size_t{cap} * 4)
      cap *= 2;
    index_rehash(g, cap);
  }
}

void TimerService::index_rehash(GroupIndex& g, std::uint32_t capacity) {
  STREAMCTL_STATE_ASSERT(capacity <= (1u << 31), "timer index of a key group too large");
  GroupIndex fresh;
  fresh.slots = std::make_unique<IndexSlot[]>(capacity); // zeroed: all empty
  fresh.mask = capacity - 1;
  fresh.shift = static_cast<std::uint8_t>(32 - std::countr_zero(capacity));
  fresh.grow_at = static_cast<std::uint32_t>(std::size_t{capacity} * 4 / 5);
  for (std::uint32_t i = 0; i < g.capacity(); ++i)
    if (g.slots[i].id_plus_one != 0)
      index_place(fresh, g.slots[i].fingerprint, g.slots[i].id_plus_one - 1);
  g = std::move(fresh);
}

// --- the heaps: 4-ary min-heaps ordered by (timestamp, hash, tag, id) ---------------------

TimerService::Heap::~Heap() {
  if (base_ != nullptr) ::operator delete (base_, std::align_val_t{64});
}

TimerService::Heap::Heap(Heap&& other) noexcept
    : base_(std::exchange(other.base_, nullptr)), size_(std::exchange(other.size_, 0)),
      capacity_(std::exchange(other.capacity_, 0)) {}

TimerService::Heap& TimerService::Heap::operator=(Heap&& other) noexcept {
  if (this != &other) {
    if (base_ != nullptr) ::operator delete (base_, std::align_val_t{64});
    base_ = std::exchange(other.base_, nullptr);
    size_ = std::exchange(other.size_, 0);
    capacity_ = std::exchange(other.capacity_, 0);
  }
  return *this;
}

void TimerService::Heap::reserve_one_more() {
  if (size_ < capacity_) return;
  STREAMCTL_STATE_ASSERT(capacity_ < (1u << 30), "more than a billion timers in one domain");
  std::uint32_t capacity = capacity_ == 0 ? 64 : capacity_ * 2;
  auto* fresh = static_cast<HeapEntry*>(
      ::operator new ((capacity + padding) * sizeof(HeapEntry), std::align_val_t{64}));
  if (size_ > 0) std::memcpy(fresh + padding, base_ + padding, size_ * sizeof(HeapEntry));
  if (base_ != nullptr) ::operator delete (base_, std::align_val_t{64});
  base_ = fresh;
  capacity_ = capacity;
}

bool TimerService::earlier(const HeapEntry& a, const HeapEntry& b) const {
  if (a.timestamp != b.timestamp) return a.timestamp < b.timestamp;
  if (a.hash_high != b.hash_high) return a.hash_high < b.hash_high;
  // Rare: equal timestamps and equal high halves of the hash (the same key with several tags).
  const Record& ra = records_[a.id];
  const Record& rb = records_[b.id];
  if (ra.hash != rb.hash) return ra.hash < rb.hash;
  if (ra.tag != rb.tag) return ra.tag < rb.tag;
  return a.id < b.id; // only for equal hashes of different keys
}

void TimerService::sift_up(Heap& h, std::uint32_t pos) {
  const HeapEntry e = h[pos];
  while (pos > 0) {
    std::uint32_t parent = (pos - 1) / 4;
    if (!earlier(e, h[parent])) break;
    h[pos] = h[parent];
    records_[h[pos].id].heap_pos = pos;
    pos = parent;
  }
  h[pos] = e;
  records_[e.id].heap_pos = pos;
}

void TimerService::sift_down(Heap& h, std::uint32_t pos) {
  const std::uint64_t n = h.size();
  const HeapEntry e = h[pos];
  for (;;) {
    const std::uint64_t first = std::uint64_t{pos} * 4 + 1;
    if (first >= n) break;
    const auto last = static_cast<std::uint32_t>(std::min(first + 4, n));
    auto best = static_cast<std::uint32_t>(first);
    for (std::uint32_t c = best + 1; c < last; ++c)
      if (earlier(h[c], h[best])) best = c;
    if (!earlier(h[best], e)) break;
    h[pos] = h[best];
    records_[h[pos].id].heap_pos = pos;
    pos = best;
  }
  h[pos] = e;
  records_[e.id].heap_pos = pos;
}

void TimerService::heap_push(TimeDomain domain, const HeapEntry& e) {
  Heap& h = heap(domain);
  h.push_back(e);
  sift_up(h, h.size() - 1);
}

void TimerService::heap_remove(TimeDomain domain, std::uint32_t pos) {
  Heap& h = heap(domain);
  const HeapEntry last = h[h.size() - 1];
  h.pop_back();
  if (pos == h.size()) return;
  h[pos] = last;
  records_[last.id].heap_pos = pos;
  if (pos > 0 && earlier(last, h[(pos - 1) / 4]))
    sift_up(h, pos);
  else
    sift_down(h, pos);
}

// --- records ------------------------------------------------------------------------------

void TimerService::release_record(std::uint32_t id) {
  Record& r = records_[id];
  if (r.key.is_long()) long_keys_->release(r.key.long_size());
  r.live = false;
  r.heap_pos = free_head_;
  free_head_ = id;
  if (size() == 0) { // forget the free list and the long keys, keep the capacity
    records_.clear();
    free_head_ = npos;
    long_keys_.reset();
  } else if (long_keys_ && long_keys_->live_bytes() == 0) {
    long_keys_.reset();
  } else if (long_keys_ && long_keys_->wants_compaction()) {
    compact_long_keys();
  }
}

void TimerService::compact_long_keys() {
  auto fresh = std::make_unique<detail::LongKeyStore>();
  fresh->reserve(long_keys_->live_bytes());
  for (Record& r : records_) {
    if (!r.live || !r.key.is_long()) continue;
    std::string_view bytes = long_keys_->get(r.key.long_offset(), r.key.long_size());
    r.key.set_long(r.key.long_size(), fresh->add(bytes));
  }
  long_keys_ = std::move(fresh);
}

// --- operations ---------------------------------------------------------------------------

bool TimerService::contains(TimeDomain domain, std::string_view key, std::uint64_t hash,
                            std::int64_t timestamp, std::int64_t tag) const {
  const GroupIndex& g = const_cast<TimerService*>(this)->group_for(hash);
  return find_slot(g, fingerprint_of(domain, hash, timestamp, tag), domain, detail::KeyProbe(key),
                   hash, timestamp, tag) != npos;
}

bool TimerService::add(TimeDomain domain, std::string_view key, std::uint64_t hash,
                       std::int64_t timestamp, std::int64_t tag) {
  GroupIndex& g = group_for(hash);
  const std::uint32_t fingerprint = fingerprint_of(domain, hash, timestamp, tag);
  const detail::KeyProbe probe(key);
  if (find_slot(g, fingerprint, domain, probe, hash, timestamp, tag) != npos) return false;

  // Everything that can throw comes first, so that a failure leaves the service as it was.
  if (g.size + 1 > g.grow_at)
    index_rehash(g, g.capacity() == 0 ? min_index_capacity : g.capacity() * 2);
  heap(domain).reserve_one_more();
  if (free_head_ == npos && records_.size() == records_.capacity())
    records_.reserve(records_.empty() ? 64 : records_.size() * 2);
  STREAMCTL_STATE_ASSERT(records_.size() < npos - 1, "more than 4 billion timers");
  detail::StoredKey stored = detail::store_key(probe, long_keys_);

  std::uint32_t id;
  if (free_head_ != npos) {
    id = free_head_;
    free_head_ = records_[id].heap_pos;
  } else {
    id = static_cast<std::uint32_t>(records_.size());
    records_.emplace_back();
  }
  records_[id] = Record{stored, timestamp, tag, hash, 0, domain, true};
  heap_push(domain, HeapEntry{timestamp, static_cast<std::uint32_t>(hash >> 32), id});
  index_place(g, fingerprint, id);
  return true;
}

bool TimerService::remove(TimeDomain domain, std::string_view key, std::uint64_t hash,
                          std::int64_t timestamp, std::int64_t tag) {
  GroupIndex& g = group_for(hash);
  std::uint32_t i = find_slot(g, fingerprint_of(domain, hash, timestamp, tag), domain,
                              detail::KeyProbe(key), hash, timestamp, tag);
  if (i == npos) return false;
  std::uint32_t id = g.slots[i].id_plus_one - 1;
  index_erase_at(g, i);
  heap_remove(domain, records_[id].heap_pos);
  release_record(id);
  return true;
}

bool TimerService::pop_due(TimeDomain domain, std::int64_t limit, Fired& out) {
  Heap& h = heap(domain);
  if (h.empty() || h[0].timestamp > limit) return false;
  const std::uint32_t id = h[0].id;
  const Record& r = records_[id];
  std::string_view key = detail::key_view(r.key, long_keys_.get());
  fired_key_.assign(key.data(), key.size());
  out = Fired{r.hash, r.timestamp, r.tag};

  GroupIndex& g = group_for(r.hash);
  index_erase_at(g, find_slot_of(g, fingerprint_of(domain, r.hash, r.timestamp, r.tag), id));
  heap_remove(domain, 0);
  release_record(id);
  return true;
}

} // namespace streamctl::state
