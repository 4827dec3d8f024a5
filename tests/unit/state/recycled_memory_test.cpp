// RecycledMemory (state/recycled_memory.hpp): blocks freed are handed out again for the same
// size and alignment, at most `cap` bytes are kept, and a KeyedMap built on it frees its tables
// back to it (deferred snapshots' copies of key groups).
#include <catch2/catch.hpp>

#include <stop_token>
#include <string>
#include <thread>

#include "state/key_group.hpp"
#include "state/keyed_map.hpp"
#include "state/recycled_memory.hpp"

namespace st = streamctl::state;

TEST_CASE("recycled memory reuses a freed block of the same shape and keeps at most its cap",
          "[recycled_memory]") {
  st::RecycledMemory memory(3000);
  const auto a64 = std::align_val_t{64};
  void* first = memory.allocate(1024, a64);
  void* second = memory.allocate(2048, a64);
  CHECK(memory.fresh() == 2);
  memory.free(first, 1024, a64);
  memory.free(second, 2048, a64); // 3072 > 3000: given back, not kept
  CHECK(memory.retained_bytes() == 1024);
  void* other_alignment = memory.allocate(1024, std::align_val_t{128});
  CHECK(other_alignment != first); // fresh: the kept block has another alignment
  CHECK(memory.fresh() == 3);
  memory.free(other_alignment, 1024, std::align_val_t{128});
  void* again = memory.allocate(1024, a64);
  CHECK(again == first);
  CHECK(memory.reused() == 1);
  CHECK(memory.retained_bytes() == 1024); // the block of the other alignment, still kept
  memory.free(again, 1024, a64);
  memory.free(nullptr, 0, a64); // no-op
}

TEST_CASE("a KeyedMap on recycled memory frees its tables there, and the next copy reuses them",
          "[recycled_memory]") {
  st::RecycledMemory memory(std::size_t{64} << 20);
  constexpr std::uint32_t max_parallelism = 8;
  st::KeyedMap<std::int64_t> live({0, max_parallelism}, max_parallelism);
  for (int n = 0; n < 5000; ++n) {
    const std::string key = "key-" + std::to_string(n);
    live.get_or_insert(key, st::hash_key_bytes(key)) = n;
  }
  for (int round = 0; round < 3; ++round) {
    // A copy freed on another thread, as the snapshot writer frees it.
    auto copy = std::make_unique<st::KeyedMap<std::int64_t>>(st::KeyGroupRange{3, 4}, max_parallelism, &memory);
    live.copy_group_into(3, *copy);
    CHECK(copy->size() == live.group_size(3));
    std::thread([c = std::move(copy)]() mutable { c.reset(); }).join();
    CHECK(memory.retained_bytes() > 0);
    CHECK(memory.fresh() == 1); // the first copy's table, reused by the later ones
    CHECK(memory.reused() == static_cast<std::size_t>(round));
  }
}

TEST_CASE("prepared blocks serve the next allocations of their shape, up to the cap", "[recycled_memory]") {
  constexpr std::size_t mib = std::size_t{1} << 20;
  const auto a64 = std::align_val_t{64};
  st::RecycledMemory memory(10 * mib);
  // Three of four fit under the cap (large blocks: mmap'd and populated, table_memory.hpp).
  CHECK(memory.prepare({3 * mib, 0, 3 * mib, 3 * mib, 3 * mib}, a64) == 9 * mib);
  CHECK(memory.prepared() == 3);
  CHECK(memory.retained_bytes() == 9 * mib);
  void* a = memory.allocate(3 * mib, a64);
  void* b = memory.allocate(3 * mib, a64);
  static_cast<char*>(a)[3 * mib - 1] = 1; // writable to its end
  CHECK(memory.fresh() == 0);
  CHECK(memory.reused() == 2);
  void* other = memory.allocate(2 * mib, a64); // no block of that shape: fresh
  CHECK(memory.fresh() == 1);
  memory.free(a, 3 * mib, a64);
  memory.free(b, 3 * mib, a64);
  memory.free(other, 2 * mib, a64); // 9 MiB kept already: 11 would pass the cap
  CHECK(memory.retained_bytes() == 9 * mib);

  std::stop_source stop;
  stop.request_stop();
  CHECK(memory.prepare({mib}, a64, stop.get_token()) == 0); // asked to stop: keeps nothing
  CHECK(memory.prepared() == 3);
}

TEST_CASE("a kept block that no checkpoint takes for idle_periods periods is released", "[recycled_memory]") {
  constexpr std::size_t mib = std::size_t{1} << 20;
  const auto a64 = std::align_val_t{64};
  st::RecycledMemory memory(64 * mib);
  REQUIRE(memory.prepare({3 * mib, 3 * mib, 3 * mib}, a64) == 9 * mib); // after a restore
  // Each period (between two barriers) the copies take two blocks, and the writer frees them.
  for (std::uint64_t period = 1; period <= st::RecycledMemory::idle_periods; ++period) {
    memory.age(); // the barrier
    void* a = memory.allocate(3 * mib, a64);
    void* b = memory.allocate(3 * mib, a64);
    memory.free(a, 3 * mib, a64);
    memory.free(b, 3 * mib, a64);
    INFO("period " << period);
    CHECK(memory.aged_out() == 0); // the third has not been idle long enough
    CHECK(memory.retained_bytes() == 9 * mib);
  }
  memory.age();
  void* a = memory.allocate(3 * mib, a64);
  memory.free(a, 3 * mib, a64); // the period's first free releases the block idle since the restore
  CHECK(memory.aged_out() == 1);
  CHECK(memory.retained_bytes() == 6 * mib);
  CHECK(memory.fresh() == 0);
  // The block b had stays kept: it was taken a period ago.
  void* again = memory.allocate(3 * mib, a64);
  void* too = memory.allocate(3 * mib, a64);
  CHECK(memory.fresh() == 0);
  memory.free(again, 3 * mib, a64);
  memory.free(too, 3 * mib, a64);
}
