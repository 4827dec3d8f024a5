// ChangedEntries (state/changed_entries.hpp) with the marks of a KeyedMap, used as an operator
// uses them: the keys of the entries changed since the last take, per key group, each once;
// nothing before the first take; a group marked whole (or with more than half its entries
// changed) hands no keys over, so it is written whole, and leaves no mark behind.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "state/changed_entries.hpp"
#include "state/key_group.hpp"
#include "state/keyed_map.hpp"

using namespace streamctl::state;

namespace {

constexpr std::uint32_t kMaxParallelism = 8;

std::uint64_t hash_of(const std::string& key) { return hash_key_bytes(key); }
std::uint32_t group_of(const std::string& key) { return key_group_of(hash_of(key), kMaxParallelism); }

// An operator's state and its tracking, as a window or a reduce keeps them.
struct Tracked {
  explicit Tracked(KeyGroupRange range = {0, kMaxParallelism})
      : map(range, kMaxParallelism), entries(range) {}

  void update(const std::string& key) {
    if (!entries.active()) {
      ++map.get_or_insert(key, hash_of(key));
      return;
    }
    bool newly_marked = false;
    ++*map.try_emplace_marked(key, hash_of(key), newly_marked).first;
    if (newly_marked) entries.record(group_of(key), key, hash_of(key), map.group_size(group_of(key)));
  }
  void erase(const std::string& key) {
    if (!map.erase(key, hash_of(key))) return;
    if (entries.active()) entries.record(group_of(key), key, hash_of(key), map.group_size(group_of(key)));
  }
  std::map<std::uint32_t, std::vector<std::string>> take() {
    std::vector<GroupEntries> out;
    entries.take(
        out,
        [&](std::string_view key, std::uint64_t hash) { return map.unmark(key, hash); },
        [&](std::uint32_t group) { map.unmark_group(group); },
        [&](std::string_view key, std::uint64_t hash) {
          CHECK(hash == hash_key_bytes(key));
          prefetched.emplace_back(key);
          map.prefetch(hash);
        });
    std::map<std::uint32_t, std::vector<std::string>> by_group;
    for (auto& e : out) {
      std::sort(e.keys.begin(), e.keys.end());
      CHECK(std::adjacent_find(e.keys.begin(), e.keys.end()) == e.keys.end()); // each once
      CHECK(by_group.count(e.key_group) == 0);
      by_group[e.key_group] = e.keys;
    }
    return by_group;
  }
  std::size_t marked() {
    std::size_t n = 0;
    map.for_each([&](std::string_view key, int) { n += map.marked(key, hash_key_bytes(key)) ? 1 : 0; });
    return n;
  }

  KeyedMap<int> map;
  ChangedEntries entries;
  std::vector<std::string> prefetched; // by take(), in order
};

// Keys of key group `g`, `n` of them.
std::vector<std::string> keys_of_group(std::uint32_t g, int n) {
  std::vector<std::string> keys;
  for (int k = 0; static_cast<int>(keys.size()) < n; ++k) {
    std::string key = "k" + std::to_string(k);
    if (group_of(key) == g) keys.push_back(key);
  }
  return keys;
}

} // namespace

TEST_CASE("changed entries: nothing is recorded before the first take", "[state][delta]") {
  Tracked t;
  CHECK_FALSE(t.entries.active());
  t.update("a");
  CHECK(t.marked() == 0);
  CHECK(t.take().empty()); // starts recording
  CHECK(t.entries.active());
  t.update("a");
  auto taken = t.take();
  REQUIRE(taken.size() == 1);
  CHECK(taken.begin()->first == group_of("a"));
  CHECK(taken.begin()->second == std::vector<std::string>{"a"});
  CHECK(t.marked() == 0);
  CHECK(t.take().empty()); // taken: forgotten
}

TEST_CASE("changed entries: insert, update, erase and insert after erase give each key once",
          "[state][delta]") {
  Tracked t;
  t.take();
  for (int k = 0; k < 4; ++k) t.update("k1");
  t.erase("k1");
  t.update("k1");
  t.update("k2");
  t.update("gone");
  t.erase("gone");
  t.erase("never");
  std::vector<std::string> all;
  for (auto& [g, keys] : t.take()) all.insert(all.end(), keys.begin(), keys.end());
  std::sort(all.begin(), all.end());
  CHECK(all == std::vector<std::string>{"gone", "k1", "k2"});
  CHECK(t.marked() == 0);
  t.update("k2");
  auto again = t.take();
  REQUIRE(again.size() == 1);
  CHECK(again.begin()->second == std::vector<std::string>{"k2"});
}

TEST_CASE("changed entries: a group marked whole, or with most entries changed, hands no keys",
          "[state][delta]") {
  Tracked t;
  const std::uint32_t g = group_of("x");
  for (const std::string& key : keys_of_group(g, 1000)) t.update(key); // before tracking
  t.take();
  t.update("x");
  t.entries.mark_whole(g);
  t.update("x"); // ignored until the take
  CHECK(t.take().count(g) == 0);
  CHECK(t.marked() == 0); // no mark left behind for the next interval
  t.update("x");
  CHECK(t.take().count(g) == 1); // whole marks end at a take

  // A tenth of the group changed: a delta. Half of it: whole, without a mark left.
  auto keys = keys_of_group(g, 1000);
  for (int k = 0; k < 100; ++k) t.update(keys[static_cast<std::size_t>(k)]);
  auto taken = t.take();
  REQUIRE(taken.count(g) == 1);
  CHECK(taken[g].size() == 100);
  for (int k = 0; k < 500; ++k) t.update(keys[static_cast<std::size_t>(k)]);
  CHECK(t.take().count(g) == 0);
  CHECK(t.marked() == 0);
  t.update(keys[0]);
  CHECK(t.take()[g] == std::vector<std::string>{keys[0]});
}

TEST_CASE("changed entries: keys outside the range are not this subtask's", "[state][delta]") {
  Tracked t({0, 4});
  t.take();
  for (int k = 0; k < 64; ++k) {
    std::string key = "k" + std::to_string(k);
    if (group_of(key) < 4) t.update(key);
    t.entries.record(group_of(key), key, hash_of(key), 100); // outside: ignored
  }
  for (const auto& [g, keys] : t.take()) CHECK(g < 4);
}

TEST_CASE("changed entries: a take prefetches each logged key a few keys before it unmarks it",
          "[state][delta]") {
  Tracked t;
  const std::vector<std::string> keys = keys_of_group(3, 200);
  for (const auto& key : keys) t.update(key);
  t.take();
  const std::size_t changed = 40;
  for (std::size_t k = 0; k < changed; ++k) t.update(keys[k]);
  t.update(keys[0]); // again: logged once
  auto taken = t.take();
  REQUIRE(taken.size() == 1);
  CHECK(taken.at(3).size() == changed);
  // The first prefetch_distance keys are unmarked without one (nothing is ahead of them yet).
  std::vector<std::string> expected(keys.begin() + ChangedEntries::prefetch_distance, keys.begin() + changed);
  CHECK(t.prefetched == expected);
  CHECK(t.marked() == 0);
}
