#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

#include "operators/hyperloglog.hpp"

using streamctl::operators::HyperLogLog;

namespace {

// A well-mixed 64-bit hash of n (splitmix64's finalizer), standing in for XXH3 of a value.
std::uint64_t mix(std::uint64_t n) {
  std::uint64_t z = n + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void add_range(HyperLogLog& h, std::uint64_t from, std::uint64_t to) {
  for (std::uint64_t k = from; k < to; ++k)
    h.add_hash(mix(k));
}

double relative_error(const HyperLogLog& h, double truth) {
  return std::abs(h.estimate() - truth) / truth;
}

bool same_registers(const HyperLogLog& a, const HyperLogLog& b) {
  for (std::uint32_t k = 0; k < HyperLogLog::registers; ++k)
    if (a.register_value(k) != b.register_value(k)) return false;
  return true;
}

} // namespace

TEST_CASE("HyperLogLog: an empty sketch estimates 0, duplicates count once", "[hll]") {
  HyperLogLog h;
  CHECK(h.empty());
  CHECK(h.estimate() == 0.0);
  for (int round = 0; round < 5; ++round)
    add_range(h, 0, 10);
  CHECK(std::llround(h.estimate()) == 10);
  CHECK(h.is_sparse());
  CHECK(h.memory_bytes() < 200);
}

TEST_CASE("HyperLogLog: error under 2% from 10^3 to 10^6 distinct values", "[hll]") {
  // The standard error at precision 14 is 1.04 / sqrt(16384) = 0.81%.
  for (std::uint64_t n : {1000ULL, 10000ULL, 100000ULL, 1000000ULL}) {
    HyperLogLog h;
    add_range(h, n * 7, n * 8); // a different range for each size
    INFO(n << " distinct: estimate " << h.estimate());
    CHECK(relative_error(h, static_cast<double>(n)) < 0.02);
    // Adding them all again changes nothing.
    double before = h.estimate();
    add_range(h, n * 7, n * 8);
    CHECK(h.estimate() == before);
  }
}

TEST_CASE("HyperLogLog: the error stays small across the range, not just at a few points",
          "[hll]") {
  // Ertl's estimator needs no switch from linear counting; check there is no bump around
  // 2.5 m - 5 m, where the classic estimator is biased.
  HyperLogLog h;
  std::uint64_t added = 0;
  double worst = 0;
  for (std::uint64_t target :
       {100ULL, 5000ULL, 20000ULL, 40000ULL, 60000ULL, 80000ULL, 120000ULL, 300000ULL}) {
    add_range(h, added, target);
    added = target;
    worst = std::max(worst, relative_error(h, static_cast<double>(target)));
  }
  INFO("worst relative error " << worst);
  CHECK(worst < 0.025);
}

TEST_CASE("HyperLogLog: turning dense keeps the registers", "[hll]") {
  HyperLogLog sparse;
  add_range(sparse, 0, HyperLogLog::sparse_limit);
  REQUIRE(sparse.is_sparse());
  HyperLogLog grown = sparse;
  add_range(grown, HyperLogLog::sparse_limit, 3 * HyperLogLog::sparse_limit);
  CHECK_FALSE(grown.is_sparse());
  CHECK(grown.memory_bytes() >= HyperLogLog::registers);
  // A sketch that went dense right away holds the same registers.
  HyperLogLog reference;
  add_range(reference, 5 * HyperLogLog::sparse_limit, 8 * HyperLogLog::sparse_limit);
  REQUIRE_FALSE(reference.is_sparse());
  add_range(reference, 0, 3 * HyperLogLog::sparse_limit);
  HyperLogLog extra;
  add_range(extra, 5 * HyperLogLog::sparse_limit, 8 * HyperLogLog::sparse_limit);
  grown.merge(extra);
  CHECK(same_registers(grown, reference));
  CHECK(grown.estimate() == reference.estimate());
}

TEST_CASE("HyperLogLog: merge gives the sketch of the union", "[hll]") {
  auto sizes = GENERATE(std::make_pair(100ULL, 150ULL),   // sparse + sparse
                        std::make_pair(100ULL, 60000ULL), // sparse + dense
                        std::make_pair(60000ULL, 100ULL), // dense + sparse
                        std::make_pair(60000ULL, 100000ULL));
  // a: [0, n1), b: [n1 / 2, n1 / 2 + n2): they overlap; the union is [0, end).
  std::uint64_t n1 = sizes.first;
  std::uint64_t n2 = sizes.second;
  std::uint64_t end = std::max(n1, n1 / 2 + n2);
  HyperLogLog a;
  HyperLogLog b;
  HyperLogLog both;
  add_range(a, 0, n1);
  add_range(b, n1 / 2, n1 / 2 + n2);
  add_range(both, 0, end);
  HyperLogLog merged = a;
  merged.merge(b);
  CHECK(same_registers(merged, both));
  CHECK(merged.estimate() == both.estimate());
  CHECK(relative_error(merged, static_cast<double>(end)) < 0.02);
  // Merge is commutative and idempotent.
  HyperLogLog other_way = b;
  other_way.merge(a);
  CHECK(same_registers(other_way, both));
  merged.merge(a);
  CHECK(same_registers(merged, both));
  // The inputs are unchanged.
  HyperLogLog fresh_b;
  add_range(fresh_b, n1 / 2, n1 / 2 + n2);
  CHECK(same_registers(b, fresh_b));
}

TEST_CASE("HyperLogLog: serialize and deserialize, sparse and dense", "[hll]") {
  std::uint64_t n = GENERATE(0ULL, 1ULL, 1000ULL, 100000ULL);
  HyperLogLog h;
  add_range(h, 0, n);
  std::string bytes;
  h.serialize(bytes);
  if (h.is_sparse()) {
    CHECK(bytes.size() <= 6 + 4 * n);
    CHECK((bytes.size() - 6) % 4 == 0);
  } else {
    CHECK(bytes.size() == 2 + HyperLogLog::registers);
  }

  HyperLogLog back;
  add_range(back, 500, 600); // replaced, not merged
  std::string_view in = bytes;
  REQUIRE(back.deserialize(in).ok());
  CHECK(in.empty());
  CHECK(back.is_sparse() == h.is_sparse());
  CHECK(same_registers(back, h));
  CHECK(back.estimate() == h.estimate());

  for (std::size_t len = 0; len < bytes.size(); len += (len < 64 ? 1 : 997)) {
    std::string_view cut(bytes.data(), len);
    HyperLogLog broken;
    INFO("length " << len);
    CHECK_FALSE(broken.deserialize(cut).ok());
    CHECK(broken.empty());
  }
}

TEST_CASE("HyperLogLog: corrupt state is refused", "[hll]") {
  HyperLogLog h;
  add_range(h, 0, 10);
  std::string bytes;
  h.serialize(bytes);
  HyperLogLog back;

  std::string wrong_precision = bytes;
  wrong_precision[0] = 12;
  std::string_view in = wrong_precision;
  auto failed = back.deserialize(in);
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.error() == "HyperLogLog state has precision 12, expected 14");

  std::string bad_rank = bytes;
  bad_rank[6] = 60; // the rank byte of the first sparse entry
  in = bad_rank;
  CHECK_FALSE(back.deserialize(in).ok());

  std::string unsorted = bytes;
  std::swap_ranges(unsorted.begin() + 6, unsorted.begin() + 10, unsorted.begin() + 10);
  in = unsorted;
  CHECK_FALSE(back.deserialize(in).ok());

  std::string bad_form = bytes;
  bad_form[1] = 7;
  in = bad_form;
  CHECK_FALSE(back.deserialize(in).ok());

  HyperLogLog dense;
  add_range(dense, 0, 50000);
  std::string dense_bytes;
  dense.serialize(dense_bytes);
  dense_bytes[100] = 52; // above the largest rank, 51
  in = dense_bytes;
  CHECK_FALSE(back.deserialize(in).ok());
}
