#include "operators/bloom_filter.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <xxhash.h>

namespace streamctl::operators {

namespace {

__extension__ typedef unsigned __int128 Uint128;

// Maps x uniformly onto [0, range) by its high bits (Lemire's fastrange).
std::uint64_t fastrange(std::uint64_t x, std::uint64_t range) {
  return static_cast<std::uint64_t>((static_cast<Uint128>(x) * range) >> 64);
}

} // namespace

BloomFilter::Hashes BloomFilter::hashes_of(std::string_view key_bytes) {
  return hashes_of(key_bytes, XXH3_64bits(key_bytes.data(), key_bytes.size()));
}

BloomFilter::Hashes BloomFilter::hashes_of(std::string_view key_bytes, std::uint64_t h1) {
  return Hashes{h1, XXH3_64bits_withSeed(key_bytes.data(), key_bytes.size(), kSecondSeed)};
}

BloomFilter::Sizing BloomFilter::Sizing::for_keys(std::uint64_t expected_keys,
                                                  double false_positive_rate) {
  const double n = static_cast<double>(std::max<std::uint64_t>(expected_keys, 1));
  const double p = std::clamp(false_positive_rate, 1e-12, 0.999);
  const double ln2 = std::log(2.0);
  const double bits = std::ceil(-n * std::log(p) / (ln2 * ln2));
  Sizing s;
  // At least 512 bits (64 bytes), whole words; capped at 2^40 bits so the cast cannot overflow
  // (a filter of 128 GiB is refused by the allocator long before).
  const double capped = std::min(bits, 1099511627776.0);
  s.bits = std::max<std::uint64_t>(512, (static_cast<std::uint64_t>(capped) + 63) / 64 * 64);
  s.hashes = static_cast<std::uint32_t>(std::clamp(std::round(-std::log(p) / ln2), 1.0, 32.0));
  return s;
}

void BloomFilter::allocate() {
  words_ = std::make_unique<std::uint64_t[]>(sizing_.bits / 64); // zeroed
}

void BloomFilter::add(const Hashes& h) {
  if (!words_) allocate();
  std::uint64_t x = h.h1;
  for (std::uint32_t i = 0; i < sizing_.hashes; ++i, x += h.h2) {
    const std::uint64_t bit = fastrange(x, sizing_.bits);
    words_[bit >> 6] |= std::uint64_t{1} << (bit & 63);
  }
}

bool BloomFilter::might_contain(const Hashes& h) const {
  if (!words_) return false;
  std::uint64_t x = h.h1;
  for (std::uint32_t i = 0; i < sizing_.hashes; ++i, x += h.h2) {
    const std::uint64_t bit = fastrange(x, sizing_.bits);
    if ((words_[bit >> 6] & (std::uint64_t{1} << (bit & 63))) == 0) return false;
  }
  return true;
}

void BloomFilter::clear() {
  if (words_) std::memset(words_.get(), 0, sizing_.bits / 8);
}

void BloomFilter::append_bytes(std::string& out) const {
  const std::size_t n = sizing_.bits / 64;
  const std::size_t at = out.size();
  out.resize(at + n * 8);
  char* p = out.data() + at;
  for (std::size_t k = 0; k < n; ++k) {
    const std::uint64_t w = words_ ? words_[k] : 0;
    for (int b = 0; b < 8; ++b)
      *p++ = static_cast<char>((w >> (8 * b)) & 0xFF);
  }
}

bool BloomFilter::load_bytes(std::string_view bytes) {
  const std::size_t n = sizing_.bits / 64;
  if (bytes.size() != n * 8) return false;
  if (!words_) allocate();
  for (std::size_t k = 0; k < n; ++k) {
    std::uint64_t w = 0;
    for (int b = 7; b >= 0; --b)
      w = (w << 8) | static_cast<unsigned char>(bytes[k * 8 + static_cast<std::size_t>(b)]);
    words_[k] = w;
  }
  return true;
}

bool KeyedBloomGenerations::restore_filter(std::uint32_t key_group, std::int64_t generation,
                                           std::string_view bytes) {
  if (!range_.contains(key_group) || generation == INT64_MIN) return false;
  Slot& slot = groups_[key_group - range_.first].slots[static_cast<std::size_t>(generation & 1)];
  if (slot.generation != INT64_MIN) return false;
  if (!slot.filter.load_bytes(bytes)) return false;
  slot.generation = generation;
  // A filter restored below the held pair goes at the next release_expired().
  if (current_ != INT64_MIN) released_at_ = INT64_MIN; // differs from current_: rescan
  return true;
}

KeyedBloomGenerations::KeyedBloomGenerations(state::KeyGroupRange range,
                                             std::uint32_t max_parallelism,
                                             std::uint64_t expected_keys,
                                             double false_positive_rate)
    : range_(range), max_parallelism_(max_parallelism) {
  STREAMCTL_STATE_ASSERT(max_parallelism >= 1 && range.end <= max_parallelism,
                         "key group range outside [0, max_parallelism)");
  const std::uint64_t per_group = (expected_keys + max_parallelism - 1) / max_parallelism;
  sizing_ = BloomFilter::Sizing::for_keys(per_group, false_positive_rate);
  groups_ = std::make_unique<Group[]>(range.size());
  for (std::uint32_t k = 0; k < range.size(); ++k)
    for (auto& slot : groups_[k].slots) slot.filter = BloomFilter(sizing_);
}

bool KeyedBloomGenerations::test_and_add(const BloomFilter::Hashes& h, std::int64_t generation) {
  advance(generation);
  if (!held(generation)) return false; // too old to be remembered
  const std::uint32_t key_group = state::key_group_of(h.h1, max_parallelism_);
  STREAMCTL_STATE_ASSERT(range_.contains(key_group),
                         "key of a key group outside this subtask's range (wrong routing?)");
  Group& g = groups_[key_group - range_.first];
  Slot& own = g.slots[static_cast<std::size_t>(generation & 1)];
  Slot& other = g.slots[static_cast<std::size_t>((generation & 1) ^ 1)];
  // Both held generations are `generation` and its neighbour, so a held `other` is g ± 1.
  if (own.generation == generation && own.filter.might_contain(h)) return true;
  if (held(other.generation) && other.filter.might_contain(h)) return true;
  if (own.generation != generation) {
    own.filter.clear(); // a generation no longer held: reuse its memory
    own.generation = generation;
  }
  own.filter.add(h);
  return false;
}

void KeyedBloomGenerations::release_expired() {
  if (current_ == released_at_) return;
  released_at_ = current_;
  for (std::uint32_t k = 0; k < range_.size(); ++k)
    for (auto& slot : groups_[k].slots)
      if (slot.generation != INT64_MIN && !held(slot.generation)) {
        slot.filter.release();
        slot.generation = INT64_MIN;
      }
}

std::size_t KeyedBloomGenerations::memory_bytes() const {
  std::size_t bytes = sizeof(Group) * range_.size();
  for (std::uint32_t k = 0; k < range_.size(); ++k)
    for (const auto& slot : groups_[k].slots) bytes += slot.filter.memory_bytes();
  return bytes;
}

} // namespace streamctl::operators
