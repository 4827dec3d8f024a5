// FrozenKeyGroups (state/frozen_key_groups.hpp): groups of a KeyedMap frozen at a "barrier"
// and taken by another thread while this one keeps changing the map, thawing each group before
// it changes it. The taken bytes must be those of the barrier, and the state machine must hold
// under a thread sanitizer: this file needs only the state library, so that it also builds
// alone with -fsanitize=thread (the command is in the first test's comment).
#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <string>
#include <thread>

#include "state/frozen_key_groups.hpp"
#include "state/key_group.hpp"
#include "state/keyed_map.hpp"

namespace st = streamctl::state;

namespace {

constexpr std::uint32_t kMaxParallelism = 16;

std::string key_of(std::uint64_t n) { return "key-" + std::to_string(n) + (n % 3 == 0 ? "-and-a-long-tail" : ""); }

// What a snapshot of group `g` holds: its entries, sorted (the map's order is its own).
std::string group_bytes(const st::KeyedMap<std::int64_t>& map, std::uint32_t g) {
  std::map<std::string, std::int64_t> sorted;
  map.for_each_in_group(g, [&](std::string_view k, const std::int64_t& v) { sorted.emplace(k, v); });
  std::string out;
  for (const auto& [k, v] : sorted) out += k + "=" + std::to_string(v) + ";";
  return out;
}

} // namespace

// Alone under ThreadSanitizer (debug checks on), from the project root, with MAIN.cpp a file
// holding `#define CATCH_CONFIG_MAIN` and `#include <catch2/catch.hpp>`:
//   g++ -std=c++20 -fsanitize=thread -O1 -g -I. -Itests tests/unit/state/frozen_key_groups_test.cpp
//     state/frozen_key_groups.cpp state/key_group.cpp MAIN.cpp -lxxhash
TEST_CASE("frozen groups taken by another thread are the barrier's, while the task changes the map",
          "[deferred][frozen]") {
  const std::uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  const st::KeyGroupRange range{0, kMaxParallelism};
  st::KeyedMap<std::int64_t> map(range, kMaxParallelism);
  st::KeyGroupFreezer freezer;
  map.set_write_check(&freezer);
  for (int round = 0; round < 20; ++round) {
    for (int i = 0; i < 3000; ++i) {
      const std::string k = key_of(rng() % 5000);
      const std::uint64_t h = st::hash_key_bytes(k);
      freezer.thaw(st::key_group_of(h, kMaxParallelism));
      map.get_or_insert(k, h) += 1;
    }
    std::map<std::uint32_t, std::string> at_barrier;
    std::vector<std::uint32_t> groups;
    for (std::uint32_t g = 0; g < kMaxParallelism; ++g) {
      at_barrier[g] = group_bytes(map, g);
      if (rng() % 4 != 0) groups.push_back(g); // some groups are not frozen at all
    }
    auto frozen = freezer.freeze(range, groups, [&map](std::uint32_t g, std::string& out) { out = group_bytes(map, g); });
    std::map<std::uint32_t, std::string> taken;
    const bool abandon = round % 7 == 6;
    std::thread writer([&, writer_seed = rng()] {
      std::mt19937_64 wr(writer_seed);
      for (std::size_t i = 0; i < frozen->size(); ++i) {
        if (abandon && i == frozen->size() / 2) {
          frozen->abandon();
          return;
        }
        if (auto bytes = frozen->take(i)) taken[frozen->group(i)] = std::move(*bytes);
        if (wr() % 3 == 0) std::this_thread::yield();
      }
    });
    // The task: inserts, updates and erases (tables grow, shrink and move), each group thawed first.
    for (int i = 0; i < 4000; ++i) {
      const std::string k = key_of(rng() % 6000);
      const std::uint64_t h = st::hash_key_bytes(k);
      freezer.thaw(st::key_group_of(h, kMaxParallelism));
      if (rng() % 5 == 0) map.erase(k, h);
      else map.get_or_insert(k, h) += 7;
    }
    writer.join();
    CHECK(frozen->settled());
    for (const auto& [g, bytes] : taken) {
      INFO("round " << round << ", key group " << g);
      CHECK(bytes == at_barrier[g]);
    }
    if (!abandon) CHECK(taken.size() == groups.size());
  }
}

TEST_CASE("a thaw waits while the writer serialises the group, then the task may change it",
          "[deferred][frozen]") {
  std::atomic<bool> in_serialise{false}, release{false};
  st::FrozenKeyGroups frozen({0, 4}, {1, 2}, [&](std::uint32_t g, std::string& out) {
    if (g == 1) {
      in_serialise = true;
      while (!release) std::this_thread::yield();
    }
    out = "group " + std::to_string(g);
  });
  std::optional<std::string> first;
  std::thread writer([&] { first = frozen.take(0); });
  while (!in_serialise) std::this_thread::yield();
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    release = true;
  });
  frozen.thaw(1); // waits for the writer
  CHECK(!frozen.unsettled(1));
  CHECK(frozen.stalls().total >= std::chrono::milliseconds(10));
  CHECK(frozen.stalls().groups_by_task == 0);
  frozen.thaw(2); // pending: the task serialises it
  CHECK(frozen.stalls().groups_by_task == 1);
  releaser.join();
  writer.join();
  CHECK(first == "group 1");
  CHECK(frozen.take(1) == "group 2");
  CHECK(frozen.settled());
}
