#pragma once
// Bloom filters for `dedup` with `method = "bloom"` (SPEC §6): approximate membership in
// bounded memory, with no false negatives and a false positive rate chosen by the user.
//
// BloomFilter is one classic Bloom filter of m bits and k hash functions. A key is given as
// two 64-bit hashes (BloomFilter::hashes_of: XXH3-64 of the key bytes with seed 0, which is
// also the key's state::hash_key_bytes, and XXH3-64 with a fixed second seed); bit i of k is
// fastrange(h1 + i * h2, m) (Kirsch and Mitzenmacher's double hashing, "Less hashing, same
// performance", 2006), fastrange(x, m) = (x * m) >> 64 in 128 bits, which uses the high bits
// of x: the low bits of h1 are nearly constant within one key group.
//
// Sizing (BloomFilter::Sizing::for_keys): for n keys and a false positive rate p,
//   m = ceil(-n ln p / (ln 2)^2) bits, rounded up to whole 64-bit words and to at least 512
//   bits (64 bytes); k = round(-ln p / ln 2) (= m/n ln 2 for the unrounded m), in [1, 32].
//
// KeyedBloomGenerations keeps, for every key group a subtask owns, the filters of the two
// newest time generations (generation g holds the keys kept at times in [g × within,
// (g + 1) × within)), so that a later snapshot can write them key group by key group
// (for_each_in_group) and a rescale can hand a key group's filters to its new owner.
//
// Not thread-safe: a filter belongs to the task thread of the subtask that owns it.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "state/key_group.hpp"

namespace streamctl::operators {

class BloomFilter {
public:
  struct Hashes {
    std::uint64_t h1; // XXH3-64, seed 0: the key's hash_key_bytes
    std::uint64_t h2; // XXH3-64, seed kSecondSeed
  };
  static constexpr std::uint64_t kSecondSeed = 0x9E3779B97F4A7C15ull;
  static Hashes hashes_of(std::string_view key_bytes);
  // The same, when the caller already has the key's hash_key_bytes.
  static Hashes hashes_of(std::string_view key_bytes, std::uint64_t h1);

  struct Sizing {
    std::uint64_t bits = 512;  // m: a multiple of 64, at least 512
    std::uint32_t hashes = 1;  // k
    // For `expected_keys` keys (at least 1) at `false_positive_rate` in (0, 1).
    static Sizing for_keys(std::uint64_t expected_keys, double false_positive_rate);
  };

  // An empty filter that holds no memory until the first add (or allocate).
  BloomFilter() = default;
  explicit BloomFilter(Sizing sizing) : sizing_(sizing) {}
  BloomFilter(BloomFilter&&) noexcept = default;
  BloomFilter& operator=(BloomFilter&&) noexcept = default;
  BloomFilter(const BloomFilter&) = delete;
  BloomFilter& operator=(const BloomFilter&) = delete;

  void add(const Hashes& h);
  // False: the key was never added. True: it was, or a false positive.
  bool might_contain(const Hashes& h) const;

  // Clears every bit, keeping the memory.
  void clear();
  // Clears and frees the memory.
  void release() { words_.reset(); }
  bool allocated() const { return words_ != nullptr; }

  const Sizing& sizing() const { return sizing_; }
  // The bit array, bit i in words()[i / 64] at bit i % 64 (empty before the first add): what a
  // snapshot writes, each word little-endian.
  std::span<const std::uint64_t> words() const {
    return words_ ? std::span<const std::uint64_t>(words_.get(), sizing_.bits / 64)
                  : std::span<const std::uint64_t>();
  }
  std::size_t memory_bytes() const { return words_ ? sizing_.bits / 8 : 0; }

  // Appends the bit array as sizing().bits / 8 bytes, words little-endian (all zero before the
  // first add): what a snapshot writes.
  void append_bytes(std::string& out) const;
  // Replaces the bit array with `bytes` as append_bytes wrote them; false (and nothing
  // changed) when their length is not sizing().bits / 8.
  bool load_bytes(std::string_view bytes);

private:
  void allocate();

  Sizing sizing_;
  std::unique_ptr<std::uint64_t[]> words_;
};

// The Bloom filters of one subtask's key groups over rotating time generations.
//
// The newest generation `current()` and the one before it are held; advancing drops older ones.
// A key of time generation g counts as seen when a held filter of generation g - 1, g or g + 1
// has it, so a duplicate is found when the two records are less than one generation apart
// (which `within` guarantees when the generation length is `within`), and never found when
// they are two generations apart or more (at least 2 × within apart in time).
class KeyedBloomGenerations {
public:
  // `expected_keys` distinct keys per generation for the whole node (all max_parallelism key
  // groups): each key group's filter is sized for expected_keys / max_parallelism of them.
  KeyedBloomGenerations(state::KeyGroupRange range, std::uint32_t max_parallelism,
                        std::uint64_t expected_keys, double false_positive_rate);

  // Whether the key (of key group key_group_of(h.h1)) was seen near `generation`; when not,
  // and `generation` is still held, the key is added to that generation's filter. A generation
  // beyond current() advances to it first; one older than current() - 1 is held no more: the
  // key counts as unseen and is not remembered.
  bool test_and_add(const BloomFilter::Hashes& h, std::int64_t generation);

  // Raises current() to `generation` (never lowers it). Filters that fall out of the held
  // pair stop counting at once; their memory is freed by the next release_expired().
  void advance(std::int64_t generation) {
    if (generation > current_) current_ = generation;
  }
  // Frees the filters of generations no longer held: O(key groups), cheap when nothing changed.
  void release_expired();
  // INT64_MIN before the first advance.
  std::int64_t current() const { return current_; }

  // Visits f(generation, const BloomFilter&) for each held filter of `key_group` that has
  // memory: what a snapshot writes for the group.
  template <typename F> void for_each_in_group(std::uint32_t key_group, F&& f) const {
    STREAMCTL_STATE_ASSERT(range_.contains(key_group), "key group outside this subtask's range");
    const Group& g = groups_[key_group - range_.first];
    for (const auto& slot : g.slots)
      if (slot.filter.allocated() && held(slot.generation)) f(slot.generation, slot.filter);
  }

  // For a restore: sets the filter of `generation` in `key_group` from BloomFilter::append_bytes
  // output. False when the group already holds a filter in that generation's slot (generation
  // & 1), the bytes do not fit this sizing, or the generation is INT64_MIN.
  bool restore_filter(std::uint32_t key_group, std::int64_t generation, std::string_view bytes);

  const BloomFilter::Sizing& sizing() const { return sizing_; }
  state::KeyGroupRange key_group_range() const { return range_; }
  std::size_t memory_bytes() const;

private:
  struct Slot {
    BloomFilter filter;
    std::int64_t generation = INT64_MIN;
  };
  // Generation g lives in slots[g & 1]: the two held generations never share a slot.
  struct Group {
    Slot slots[2];
  };

  bool held(std::int64_t generation) const {
    // INT64_MIN marks an empty slot (and current_ before the first advance).
    return generation != INT64_MIN && current_ != INT64_MIN &&
           (generation == current_ || generation == current_ - 1);
  }

  state::KeyGroupRange range_;
  std::uint32_t max_parallelism_;
  BloomFilter::Sizing sizing_;
  std::unique_ptr<Group[]> groups_;
  std::int64_t current_ = INT64_MIN;
  std::int64_t released_at_ = INT64_MIN; // current_ at the last release_expired()
};

} // namespace streamctl::operators
