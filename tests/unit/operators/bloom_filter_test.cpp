#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "operators/bloom_filter.hpp"

using streamctl::operators::BloomFilter;
using streamctl::operators::KeyedBloomGenerations;

namespace {

BloomFilter::Hashes hashes(const std::string& key) { return BloomFilter::hashes_of(key); }

} // namespace

TEST_CASE("bloom filter sizing follows m = -n ln p / (ln 2)^2 and k = m/n ln 2", "[bloom_filter][dedup]") {
  auto s = BloomFilter::Sizing::for_keys(100000, 0.01);
  // -100000 * ln(0.01) / ln(2)^2 = 958505.8 bits, rounded up to whole words
  CHECK(s.bits == 958528);
  CHECK(s.hashes == 7);
  auto tiny = BloomFilter::Sizing::for_keys(1, 0.01);
  CHECK(tiny.bits == 512); // at least 64 bytes
  CHECK(tiny.hashes == 7);
  CHECK(BloomFilter::Sizing::for_keys(1000, 0.5).hashes == 1);
  CHECK(BloomFilter::Sizing::for_keys(0, 0.01).bits == 512);
}

TEST_CASE("bloom filter has no false negatives and about the target false positive rate", "[bloom_filter][dedup]") {
  const int n = 100000;
  BloomFilter filter(BloomFilter::Sizing::for_keys(n, 0.01));
  CHECK_FALSE(filter.allocated()); // memory only on the first add
  CHECK_FALSE(filter.might_contain(hashes("key-0")));
  for (int i = 0; i < n; ++i) filter.add(hashes("key-" + std::to_string(i)));
  CHECK(filter.allocated());
  CHECK(filter.memory_bytes() == 958528 / 8);

  int missing = 0;
  for (int i = 0; i < n; ++i)
    if (!filter.might_contain(hashes("key-" + std::to_string(i)))) ++missing;
  CHECK(missing == 0);

  int false_positives = 0;
  for (int i = 0; i < n; ++i)
    if (filter.might_contain(hashes("other-" + std::to_string(i)))) ++false_positives;
  double rate = static_cast<double>(false_positives) / n;
  INFO("measured false positive rate " << rate);
  CHECK(rate > 0.008);
  CHECK(rate < 0.0125);

  filter.clear();
  CHECK(filter.allocated());
  CHECK_FALSE(filter.might_contain(hashes("key-1")));
  filter.release();
  CHECK_FALSE(filter.allocated());
  CHECK(filter.memory_bytes() == 0);
}

TEST_CASE("bloom filter hashes: h1 is the key's hash_key_bytes, h2 a second XXH3", "[bloom_filter][dedup]") {
  auto h = BloomFilter::hashes_of("abc");
  CHECK(h.h1 == streamctl::state::hash_key_bytes("abc"));
  CHECK(h.h2 != h.h1);
  auto again = BloomFilter::hashes_of("abc", h.h1);
  CHECK(again.h2 == h.h2);
}

TEST_CASE("keyed bloom generations hold the current and the previous generation", "[bloom_filter][dedup]") {
  KeyedBloomGenerations gens({0, 128}, 128, 1000, 0.01);
  auto a = hashes("a");
  CHECK_FALSE(gens.test_and_add(a, 5)); // first sight: remembered in generation 5
  CHECK(gens.current() == 5);
  CHECK(gens.test_and_add(a, 5));
  CHECK(gens.test_and_add(a, 4)); // a neighbour generation sees it
  CHECK(gens.test_and_add(a, 6)); // advances to 6: 5 is the previous generation
  CHECK(gens.current() == 6);
  CHECK(gens.test_and_add(a, 6));
  CHECK_FALSE(gens.test_and_add(a, 3)); // older than current - 1: not held, not remembered
  CHECK_FALSE(gens.test_and_add(hashes("b"), 3));
  CHECK_FALSE(gens.test_and_add(hashes("b"), 3)); // still not remembered

  // Two generations on, generation 5 is dropped: "a" is new again.
  CHECK_FALSE(gens.test_and_add(a, 7));
  CHECK(gens.current() == 7);
  CHECK(gens.test_and_add(a, 7));
}

TEST_CASE("keyed bloom generations keep filters per key group and free old ones", "[bloom_filter][dedup]") {
  using streamctl::state::key_group_of;
  const std::uint32_t max_parallelism = 16;
  KeyedBloomGenerations gens({4, 8}, max_parallelism, 1600, 0.01);
  const std::size_t empty_bytes = gens.memory_bytes();

  // Keys of the groups this subtask owns, found by hashing.
  std::vector<std::string> keys;
  for (int i = 0; keys.size() < 20; ++i) {
    std::string k = "k" + std::to_string(i);
    auto group = key_group_of(hashes(k).h1, max_parallelism);
    if (group >= 4 && group < 8) keys.push_back(k);
  }
  for (const auto& k : keys) CHECK_FALSE(gens.test_and_add(hashes(k), 10));
  for (const auto& k : keys) CHECK(gens.test_and_add(hashes(k), 11));

  // A snapshot would visit each group's held filters with their generations.
  std::size_t filters = 0;
  for (std::uint32_t group = 4; group < 8; ++group)
    gens.for_each_in_group(group, [&](std::int64_t generation, const BloomFilter& f) {
      CHECK((generation == 10 || generation == 11));
      CHECK(f.words().size() * 64 == gens.sizing().bits);
      ++filters;
    });
  CHECK(filters >= 1);
  // Each filter is sized for 1600 / 16 = 100 keys: 959 bits, rounded up to 15 words.
  CHECK(gens.sizing().bits == 960);
  CHECK(gens.memory_bytes() > empty_bytes);

  gens.advance(20);
  gens.release_expired();
  CHECK(gens.memory_bytes() == empty_bytes);
  for (std::uint32_t group = 4; group < 8; ++group)
    gens.for_each_in_group(group, [&](std::int64_t, const BloomFilter&) { FAIL("no filter is held"); });
}
