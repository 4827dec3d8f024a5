// ChangedEntries (state/changed_entries.hpp): the keys of the entries changed since the last
// take, per key group, each once; nothing before the first take; a group marked whole (or
// with more changed keys than entries) hands no keys over, so it is written whole.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "state/changed_entries.hpp"
#include "state/key_group.hpp"

using namespace streamctl::state;

namespace {

constexpr std::uint32_t kMaxParallelism = 8;

std::uint64_t hash_of(const std::string& key) { return hash_key_bytes(key); }

std::map<std::uint32_t, std::vector<std::string>> take(ChangedEntries& c) {
  std::vector<GroupEntries> out;
  c.take(out);
  std::map<std::uint32_t, std::vector<std::string>> by_group;
  for (auto& e : out) {
    std::sort(e.keys.begin(), e.keys.end());
    CHECK(by_group.count(e.key_group) == 0);
    by_group[e.key_group] = e.keys;
  }
  return by_group;
}

} // namespace

TEST_CASE("changed entries: nothing is recorded before the first take", "[state][delta]") {
  ChangedEntries c({0, kMaxParallelism}, kMaxParallelism);
  CHECK_FALSE(c.active());
  c.mark("a", hash_of("a"), 100);
  CHECK(take(c).empty()); // starts recording
  CHECK(c.active());
  c.mark("a", hash_of("a"), 100);
  auto t = take(c);
  REQUIRE(t.size() == 1);
  CHECK(t.begin()->first == key_group_of(hash_of("a"), kMaxParallelism));
  CHECK(t.begin()->second == std::vector<std::string>{"a"});
  CHECK(take(c).empty()); // taken: forgotten
}

TEST_CASE("changed entries: insert, update, erase and insert after erase give each key once",
          "[state][delta]") {
  ChangedEntries c({0, kMaxParallelism}, kMaxParallelism);
  take(c);
  // The tracker does not know what a mark means: insert, update, erase and insert again of
  // one key in one interval are four marks of it, recorded once.
  for (int k = 0; k < 4; ++k) c.mark("k1", hash_of("k1"), 100);
  c.mark("k2", hash_of("k2"), 100);
  auto t = take(c);
  std::vector<std::string> all;
  for (auto& [g, keys] : t) all.insert(all.end(), keys.begin(), keys.end());
  std::sort(all.begin(), all.end());
  CHECK(all == std::vector<std::string>{"k1", "k2"});
}

TEST_CASE("changed entries: a group marked whole, or with more changes than entries, hands no keys",
          "[state][delta]") {
  ChangedEntries c({0, kMaxParallelism}, kMaxParallelism);
  take(c);
  const std::uint32_t g = key_group_of(hash_of("x"), kMaxParallelism);
  c.mark("x", hash_of("x"), 10);
  c.mark_whole(g);
  c.mark("x", hash_of("x"), 10); // ignored until the take
  CHECK(take(c).count(g) == 0);
  c.mark("x", hash_of("x"), 10);
  CHECK(take(c).count(g) == 1); // whole marks end at a take

  // Keys of one group, far more than the group holds.
  int marked = 0;
  for (int k = 0; marked < 200; ++k) {
    std::string key = "k" + std::to_string(k);
    if (key_group_of(hash_of(key), kMaxParallelism) != g) continue;
    c.mark(key, hash_of(key), 1);
    ++marked;
  }
  CHECK(take(c).count(g) == 0);
}

TEST_CASE("changed entries: keys outside the range are not this subtask's", "[state][delta]") {
  ChangedEntries c({0, 4}, kMaxParallelism);
  take(c);
  for (int k = 0; k < 64; ++k) {
    std::string key = "k" + std::to_string(k);
    c.mark(key, hash_of(key), 100);
  }
  for (const auto& [g, keys] : take(c)) CHECK(g < 4);
}
