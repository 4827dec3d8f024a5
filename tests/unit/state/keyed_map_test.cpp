#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "state/key_codec.hpp"
#include "state/key_group.hpp"
#include "state/keyed_map.hpp"

using namespace streamctl::state;

namespace {

constexpr std::uint32_t max_p = 128;

struct Key {
  std::string bytes;
  std::uint64_t hash;
};

// `n` distinct encoded keys: one-string keys of 1 to 40 characters (so both inline keys of at
// most 15 bytes and long keys), and int keys.
std::vector<Key> make_keys(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  FieldNames names;
  std::vector<Key> keys;
  std::unordered_set<std::string> seen;
  std::string text;
  while (keys.size() < n) {
    Value v;
    if (rng() % 4 == 0) {
      v = Value::integer(static_cast<std::int64_t>(rng()));
    } else {
      text = "k" + std::to_string(keys.size());
      std::size_t len = 1 + rng() % 40;
      while (text.size() < len)
        text += static_cast<char>('a' + rng() % 26);
      v = Value::string(text);
    }
    Key k;
    encode_key(std::span<const Value>(&v, 1), names, k.bytes);
    if (!seen.insert(k.bytes).second) continue;
    k.hash = hash_key_bytes(k.bytes);
    keys.push_back(std::move(k));
  }
  return keys;
}

template <typename V> std::unordered_map<std::string, V> contents(const KeyedMap<V>& map) {
  std::unordered_map<std::string, V> out;
  std::size_t visits = 0;
  map.for_each([&](std::string_view key, const V& v) {
    out.emplace(std::string(key), v);
    ++visits;
  });
  CHECK(visits == out.size()); // every key visited once
  return out;
}

// Counts live instances, to check that every constructed value is destroyed exactly once.
struct Tracked {
  static inline long live = 0;
  long value = 0;
  Tracked() { ++live; }
  explicit Tracked(long v) : value(v) { ++live; }
  Tracked(Tracked&& o) noexcept : value(o.value) { ++live; }
  Tracked& operator=(Tracked&&) noexcept = default;
  ~Tracked() { --live; }
};

} // namespace

TEST_CASE("KeyedMap inserts, finds and erases", "[state][keyed_map]") {
  KeyedMap<std::int64_t> map(key_group_range(0, 1, max_p), max_p);
  std::string k = "key";
  std::uint64_t h = hash_key_bytes(k);
  CHECK(map.find(k, h) == nullptr);
  bool inserted = false;
  map.get_or_insert(k, h, &inserted) = 5;
  CHECK(inserted);
  CHECK(map.get_or_insert(k, h, &inserted) == 5);
  CHECK_FALSE(inserted);
  REQUIRE(map.find(k, h) != nullptr);
  CHECK(*map.find(k, h) == 5);
  CHECK(map.size() == 1);
  CHECK(map.group_size(key_group_of(h, max_p)) == 1);
  CHECK(map.erase(k, h));
  CHECK_FALSE(map.erase(k, h));
  CHECK(map.find(k, h) == nullptr);
  CHECK(map.empty());
  // The empty key and a 15- and 16-byte key (inline limit) are keys like any other.
  for (std::string key : {std::string(), std::string(15, 'x'), std::string(16, 'x')}) {
    std::uint64_t kh = hash_key_bytes(key);
    map.get_or_insert(key, kh) = static_cast<std::int64_t>(key.size());
    REQUIRE(map.find(key, kh) != nullptr);
    CHECK(*map.find(key, kh) == static_cast<std::int64_t>(key.size()));
  }
  CHECK(map.size() == 3);
  auto c = contents(map);
  CHECK(c.count(std::string(16, 'x')) == 1);
  CHECK(c.count(std::string()) == 1);
}

TEST_CASE("KeyedMap agrees with std::unordered_map under random operations", "[state][keyed_map]") {
  const std::size_t n = 200000;
  std::vector<Key> keys = make_keys(n, 1);
  KeyedMap<std::int64_t> map(key_group_range(0, 1, max_p), max_p);
  std::unordered_map<std::string, std::int64_t> reference;
  std::mt19937_64 rng(2);
  // Mismatches are counted rather than asserted one by one: millions of Catch assertions
  // would dominate the run time.
  std::size_t mismatches = 0;

  for (std::size_t k = 0; k < n; ++k) {
    bool inserted = false;
    map.get_or_insert(keys[k].bytes, keys[k].hash, &inserted) = static_cast<std::int64_t>(k);
    mismatches += !inserted;
    reference[keys[k].bytes] = static_cast<std::int64_t>(k);
  }
  REQUIRE(map.size() == n);
  for (std::size_t k = 0; k < n; ++k) {
    const std::int64_t* v = map.find(keys[k].bytes, keys[k].hash);
    mismatches += v == nullptr || *v != static_cast<std::int64_t>(k);
  }
  REQUIRE(mismatches == 0);

  // Random increments, erases and lookups; a sparser phase makes tables shrink, a denser one
  // grow again.
  for (int phase = 0; phase < 3; ++phase) {
    const int erase_weight = phase == 1 ? 8 : 3;
    for (int op = 0; op < 250000; ++op) {
      const Key& k = keys[rng() % n];
      int what = static_cast<int>(rng() % 10);
      if (what < erase_weight) {
        bool erased = map.erase(k.bytes, k.hash);
        mismatches += erased != (reference.erase(k.bytes) == 1);
      } else if (what < 8) {
        bool inserted = false;
        std::int64_t& v = map.get_or_insert(k.bytes, k.hash, &inserted);
        auto [it, ref_inserted] = reference.try_emplace(k.bytes, 0);
        mismatches += inserted != ref_inserted || v != it->second;
        v += 1;
        it->second += 1;
      } else {
        const std::int64_t* v = map.find(k.bytes, k.hash);
        auto it = reference.find(k.bytes);
        mismatches +=
            (v != nullptr) != (it != reference.end()) || (v != nullptr && *v != it->second);
      }
    }
    REQUIRE(mismatches == 0);
    REQUIRE(map.size() == reference.size());
    auto c = contents(map);
    REQUIRE(c.size() == reference.size());
    for (const auto& [key, v] : reference) {
      auto it = c.find(key);
      mismatches += it == c.end() || it->second != v;
    }
    REQUIRE(mismatches == 0);
  }

  // Erase everything in random order, then reinsert: no stale entry survives.
  std::vector<std::size_t> order(n);
  for (std::size_t k = 0; k < n; ++k)
    order[k] = k;
  std::shuffle(order.begin(), order.end(), rng);
  for (std::size_t k : order)
    mismatches += map.erase(keys[k].bytes, keys[k].hash) != (reference.erase(keys[k].bytes) == 1);
  REQUIRE(map.empty());
  for (std::size_t k = 0; k < n; k += 2)
    map.get_or_insert(keys[k].bytes, keys[k].hash) = 7;
  for (std::size_t k = 0; k < n; ++k)
    mismatches += (map.find(keys[k].bytes, keys[k].hash) != nullptr) != (k % 2 == 0);
  CHECK(mismatches == 0);
}

TEST_CASE("KeyedMap iterates, erases and clears by key group", "[state][keyed_map]") {
  const KeyGroupRange range = key_group_range(2, 5, max_p); // [51, 76)
  std::vector<Key> all = make_keys(60000, 3);
  std::vector<Key> owned;
  for (auto& k : all)
    if (range.contains(key_group_of(k.hash, max_p))) owned.push_back(k);
  REQUIRE(owned.size() > 5000);

  KeyedMap<std::int64_t> map(range, max_p);
  std::map<std::uint32_t, std::set<std::string>> by_group;
  for (std::size_t k = 0; k < owned.size(); ++k) {
    map.get_or_insert(owned[k].bytes, owned[k].hash) = static_cast<std::int64_t>(k);
    by_group[key_group_of(owned[k].hash, max_p)].insert(owned[k].bytes);
  }
  for (std::uint32_t kg = range.first; kg < range.end; ++kg) {
    std::set<std::string> seen;
    map.for_each_in_group(kg, [&](std::string_view key, std::int64_t&) {
      CHECK(key_group_of(hash_key_bytes(key), max_p) == kg);
      CHECK(seen.insert(std::string(key)).second);
    });
    CHECK(seen == by_group[kg]);
    CHECK(map.group_size(kg) == by_group[kg].size());
    // The hashed visit gives the same entries, each with the hash it was stored under.
    std::set<std::string> seen_hashed;
    map.for_each_hashed_in_group(kg, [&](std::string_view key, std::uint64_t hash, std::int64_t& v) {
      CHECK(hash == hash_key_bytes(key));
      CHECK(owned[static_cast<std::size_t>(v)].bytes == key);
      seen_hashed.insert(std::string(key));
    });
    CHECK(seen_hashed == seen);
  }

  // erase_if_in_group visits each entry of the group once and erases what it is told to.
  const std::uint32_t g1 = range.first + 3;
  std::size_t visited = 0, odd = 0;
  std::size_t erased = map.erase_if_in_group(g1, [&](std::string_view, std::int64_t& v) {
    ++visited;
    odd += v % 2;
    return v % 2 == 1;
  });
  CHECK(visited == by_group[g1].size());
  CHECK(erased == odd);
  map.for_each_in_group(g1, [&](std::string_view, std::int64_t& v) { CHECK(v % 2 == 0); });
  CHECK(map.group_size(g1) == by_group[g1].size() - odd);

  // Erasing every entry of a group through erase_if.
  const std::uint32_t g2 = range.first + 4;
  CHECK(map.erase_if_in_group(g2, [](std::string_view, std::int64_t&) { return true; }) ==
        by_group[g2].size());
  CHECK(map.group_size(g2) == 0);

  // clear_group removes exactly that group.
  const std::uint32_t g3 = range.first + 7;
  std::size_t before = map.size();
  map.clear_group(g3);
  CHECK(map.group_size(g3) == 0);
  CHECK(map.size() == before - by_group[g3].size());
  for (auto& k : owned) {
    std::uint32_t kg = key_group_of(k.hash, max_p);
    if (kg == g2 || kg == g3 || kg == g1) continue;
    CHECK(map.find(k.bytes, k.hash) != nullptr);
  }
  // A cleared group takes new keys again.
  for (auto& k : owned)
    if (key_group_of(k.hash, max_p) == g3) map.get_or_insert(k.bytes, k.hash) = -1;
  CHECK(map.group_size(g3) == by_group[g3].size());

  // erase_if over the whole map.
  std::size_t rest = map.size();
  CHECK(map.erase_if([](std::string_view, std::int64_t&) { return true; }) == rest);
  CHECK(map.empty());
}

TEST_CASE("KeyedMap destroys every value exactly once", "[state][keyed_map]") {
  std::vector<Key> keys = make_keys(30000, 4);
  {
    KeyedMap<Tracked> map(key_group_range(0, 1, max_p), max_p);
    std::mt19937_64 rng(5);
    for (int op = 0; op < 200000; ++op) {
      const Key& k = keys[rng() % keys.size()];
      if (rng() % 3 == 0)
        map.erase(k.bytes, k.hash);
      else
        map.try_emplace(k.bytes, k.hash, static_cast<long>(op));
      if (op % 1000 == 0) REQUIRE(Tracked::live == static_cast<long>(map.size()));
    }
    REQUIRE(Tracked::live == static_cast<long>(map.size()));
    map.erase_if([](std::string_view, Tracked& t) { return t.value % 2 == 0; });
    REQUIRE(Tracked::live == static_cast<long>(map.size()));
    map.clear_group(5);
    REQUIRE(Tracked::live == static_cast<long>(map.size()));

    KeyedMap<Tracked> moved(std::move(map));
    REQUIRE(Tracked::live == static_cast<long>(moved.size()));
    CHECK(map.size() == 0); // NOLINT(bugprone-use-after-move): moved-from is empty
    KeyedMap<Tracked> assigned(key_group_range(0, 1, max_p), max_p);
    assigned.get_or_insert(keys[0].bytes, keys[0].hash);
    assigned = std::move(moved);
    REQUIRE(Tracked::live == static_cast<long>(assigned.size()));
  }
  CHECK(Tracked::live == 0);
}

TEST_CASE("KeyedMap holds values that own memory (no leaks under ASan)", "[state][keyed_map]") {
  std::vector<Key> keys = make_keys(20000, 6);
  KeyedMap<std::string> map(key_group_range(0, 1, max_p), max_p);
  for (std::size_t k = 0; k < keys.size(); ++k)
    map.get_or_insert(keys[k].bytes, keys[k].hash) = std::string(20 + k % 100, 'v');
  std::size_t with_strings = map.memory_bytes();
  for (std::size_t k = 0; k < keys.size(); k += 2)
    CHECK(map.erase(keys[k].bytes, keys[k].hash));
  for (std::size_t k = 1; k < keys.size(); k += 2) {
    std::string* v = map.find(keys[k].bytes, keys[k].hash);
    REQUIRE(v != nullptr);
    CHECK(v->size() == 20 + k % 100);
    *v += std::string(200, 'w');
  }
  CHECK(map.memory_bytes() < with_strings + keys.size() / 2 * 240);
  map.clear_group(0);
  // Move-only values work too.
  KeyedMap<std::unique_ptr<int>> owners(key_group_range(0, 1, max_p), max_p);
  for (std::size_t k = 0; k < 1000; ++k)
    owners.get_or_insert(keys[k].bytes, keys[k].hash) = std::make_unique<int>(static_cast<int>(k));
  for (std::size_t k = 0; k < 1000; k += 3)
    owners.erase(keys[k].bytes, keys[k].hash);
  CHECK(**owners.find(keys[1].bytes, keys[1].hash) == 1);
}

TEST_CASE("KeyedMap tells keys with equal hashes apart", "[state][keyed_map]") {
  // Hash collisions are astronomically rare with XXH3, but must not merge keys. Give many keys
  // the same hash (all in one group, one home slot, one long cluster).
  KeyedMap<int> map(key_group_range(0, 1, max_p), max_p);
  const std::uint64_t h = 0x0123456789ABCDEFULL;
  std::vector<std::string> keys;
  for (int k = 0; k < 300; ++k)
    keys.push_back(k % 2 == 0 ? "short" + std::to_string(k)
                              : "a long key, beyond the inline bytes #" + std::to_string(k));
  for (int k = 0; k < 300; ++k)
    map.get_or_insert(keys[k], h) = k;
  for (int k = 0; k < 300; ++k) {
    REQUIRE(map.find(keys[k], h) != nullptr);
    CHECK(*map.find(keys[k], h) == k);
  }
  for (int k = 0; k < 300; k += 3)
    CHECK(map.erase(keys[k], h));
  for (int k = 0; k < 300; ++k)
    CHECK((map.find(keys[k], h) != nullptr) == (k % 3 != 0));
  CHECK(map.find("absent", h) == nullptr);
}

// A probe copies an inline key of up to 15 bytes in overlapping pieces (state/short_copy.hpp):
// keys of every length, differing in any one byte, with one hash, must stay apart and be
// found; the key each visit gives back is the key put in.
TEST_CASE("KeyedMap tells keys of every length apart byte by byte", "[state][keyed_map]") {
  KeyedMap<int> map(key_group_range(0, 1, max_p), max_p);
  const std::uint64_t h = 0x0123456789ABCDEFULL;
  std::vector<std::string> keys;
  for (std::size_t len = 0; len <= 20; ++len) {
    const std::string base(len, 'a');
    keys.push_back(base);
    for (std::size_t at = 0; at < len; ++at) {
      std::string k = base;
      k[at] = 'b';
      keys.push_back(k);
    }
  }
  for (std::size_t k = 0; k < keys.size(); ++k)
    map.get_or_insert(keys[k], h) = static_cast<int>(k);
  CHECK(map.size() == keys.size());
  for (std::size_t k = 0; k < keys.size(); ++k) {
    INFO(keys[k]);
    REQUIRE(map.find(keys[k], h) != nullptr);
    CHECK(*map.find(keys[k], h) == static_cast<int>(k));
  }
  map.for_each([&](std::string_view key, int v) { CHECK(key == keys[static_cast<std::size_t>(v)]); });
  CHECK(map.find(std::string(21, 'a'), h) == nullptr);
  CHECK(map.find(std::string("ab\0", 3), h) == nullptr);
}

TEST_CASE("KeyedMap compacts long keys and shrinks emptied tables", "[state][keyed_map]") {
  KeyedMap<std::int64_t> map(key_group_range(0, 1, max_p), max_p);
  std::vector<std::string> keys;
  for (int k = 0; k < 50000; ++k)
    keys.push_back("a long key of more than fifteen bytes, number " + std::to_string(k));
  for (auto& k : keys)
    map.get_or_insert(k, hash_key_bytes(k)) = 1;
  std::size_t full = map.memory_bytes();
  CHECK(full > keys.size() * (32 + 45));
  // Erase and insert new long keys repeatedly: garbage must not pile up.
  for (int round = 0; round < 5; ++round)
    for (int k = 0; k < 50000; ++k) {
      map.erase(keys[k], hash_key_bytes(keys[k]));
      keys[k] += "+";
      map.get_or_insert(keys[k], hash_key_bytes(keys[k])) = round;
    }
  CHECK(map.memory_bytes() < full * 2);
  for (auto& k : keys)
    REQUIRE(map.find(k, hash_key_bytes(k)) != nullptr);
  for (std::size_t k = 10; k < keys.size(); ++k)
    map.erase(keys[k], hash_key_bytes(keys[k]));
  CHECK(map.size() == 10);
  CHECK(map.memory_bytes() < full / 20);
  for (std::size_t k = 0; k < 10; ++k)
    CHECK(map.find(keys[k], hash_key_bytes(keys[k])));
}

TEST_CASE("KeyedMap stores short keys compactly", "[state][keyed_map]") {
  // 100k one-string keys "u123456": 32-byte slots, tables between 40% and 80% full.
  KeyedMap<std::int64_t> map(key_group_range(0, 1, max_p), max_p);
  FieldNames names;
  std::string key;
  for (int k = 0; k < 100000; ++k) {
    std::string text = "u" + std::to_string(100000 + k);
    Value v = Value::string(text);
    encode_key(std::span<const Value>(&v, 1), names, key);
    map.get_or_insert(key, hash_key_bytes(key)) += 1;
  }
  double per_key = static_cast<double>(map.memory_bytes()) / static_cast<double>(map.size());
  INFO(per_key);
  CHECK(per_key < 32 / 0.4 + 1);
  CHECK(per_key > 32);
}

TEST_CASE("KeyedMap adopts a key group built apart, as a parallel restore does", "[state][keyed_map]") {
  const KeyGroupRange range = key_group_range(1, 4, max_p); // [32, 64)
  std::vector<Key> all = make_keys(20000, 7);
  KeyedMap<Tracked> map(range, max_p);
  std::unordered_map<std::string, long> expected;
  const long before = Tracked::live;
  {
    // One single-group map per group, each filled as a helper thread would, then adopted.
    for (std::uint32_t kg = range.first; kg < range.end; ++kg) {
      KeyedMap<Tracked> apart({kg, kg + 1}, max_p);
      std::size_t n = 0;
      for (const auto& k : all)
        if (key_group_of(k.hash, max_p) == kg) ++n;
      apart.reserve_group(kg, n);
      for (std::size_t i = 0; i < all.size(); ++i)
        if (key_group_of(all[i].hash, max_p) == kg) {
          apart.try_emplace(all[i].bytes, all[i].hash, static_cast<long>(i));
          expected[all[i].bytes] = static_cast<long>(i);
        }
      REQUIRE(apart.size() == n);
      map.adopt_group(kg, apart);
      CHECK(apart.empty());
      CHECK(apart.group_size(kg) == 0);
      CHECK(map.group_size(kg) == n);
    }
  }
  REQUIRE(map.size() == expected.size());
  REQUIRE(!expected.empty());
  for (const auto& k : all) {
    if (!range.contains(key_group_of(k.hash, max_p))) continue;
    const Tracked* v = map.find(k.bytes, k.hash);
    REQUIRE(v != nullptr);
    CHECK(v->value == expected[k.bytes]);
  }
  CHECK(Tracked::live - before == static_cast<long>(map.size())); // nothing copied or leaked
  // The adopted tables work as any other: inserts and erases after adoption.
  for (const auto& k : all)
    if (range.contains(key_group_of(k.hash, max_p))) CHECK(map.erase(k.bytes, k.hash));
  CHECK(map.empty());
  CHECK(Tracked::live == before);
}

// Change marks (incremental checkpoints): a bit in the slot that moves with the entry through
// growth, backward-shift erases and long-key compaction, and that no lookup sees.
TEST_CASE("KeyedMap keeps change marks through moves and ignores them in lookups", "[state][keyed_map]") {
  KeyedMap<std::int64_t> map(key_group_range(0, 1, max_p), max_p);
  std::vector<std::string> keys;
  for (int k = 0; k < 20000; ++k)
    keys.push_back(k % 2 ? "short" + std::to_string(k) : "a long key of more than fifteen bytes " + std::to_string(k));
  std::set<std::string> marked;
  for (std::size_t k = 0; k < keys.size(); ++k) {
    bool newly = false;
    if (k % 3 == 0) {
      auto [value, inserted] = map.try_emplace_marked(keys[k], hash_key_bytes(keys[k]), newly);
      CHECK(inserted);
      CHECK(newly);
      *value = static_cast<std::int64_t>(k);
      marked.insert(keys[k]);
    } else {
      map.get_or_insert(keys[k], hash_key_bytes(keys[k])) = static_cast<std::int64_t>(k);
    }
  }
  // Erase a third (shifts and, for the long keys, compaction), then check every survivor.
  for (std::size_t k = 1; k < keys.size(); k += 3) map.erase(keys[k], hash_key_bytes(keys[k]));
  for (std::size_t k = 0; k < keys.size(); ++k) {
    const std::int64_t* v = map.find(keys[k], hash_key_bytes(keys[k]));
    if (k % 3 == 1) {
      CHECK(v == nullptr);
      continue;
    }
    REQUIRE(v != nullptr);
    CHECK(*v == static_cast<std::int64_t>(k));
    CHECK(map.marked(keys[k], hash_key_bytes(keys[k])) == (marked.count(keys[k]) == 1));
  }
  std::size_t visited = 0;
  map.for_each([&](std::string_view key, std::int64_t) {
    ++visited;
    CHECK(std::find(keys.begin(), keys.end(), std::string(key)) != keys.end()); // the bytes, no mark
  });
  CHECK(visited == map.size());
  bool newly = true;
  map.try_emplace_marked(keys[0], hash_key_bytes(keys[0]), newly);
  CHECK_FALSE(newly); // marked already
  CHECK(map.unmark(keys[0], hash_key_bytes(keys[0])) == std::optional<bool>(true));
  CHECK(map.unmark(keys[0], hash_key_bytes(keys[0])) == std::optional<bool>(false));
  CHECK(map.unmark(keys[1], hash_key_bytes(keys[1])) == std::nullopt);
  for (std::uint32_t g = 0; g < max_p; ++g) map.unmark_group(g);
  for (const std::string& k : keys) CHECK_FALSE(map.marked(k, hash_key_bytes(k)));
}

// unmark_group moves a group to its next mark epoch rather than scanning it, and scans once the
// epochs run out: an entry marked in an earlier epoch, untouched since, must not read as marked
// when the epochs come round again (it would then not be recorded when it changes).
TEST_CASE("KeyedMap unmarks whole groups through many epochs", "[state][keyed_map]") {
  KeyedMap<std::int64_t> map(key_group_range(0, 1, max_p), max_p);
  std::vector<std::string> keys;
  for (int k = 0; k < 3000; ++k)
    keys.push_back(k % 2 ? "k" + std::to_string(k) : "a long key of more than fifteen bytes " + std::to_string(k));
  for (int round = 0; round < 40; ++round) {
    std::set<std::string> marked;
    for (std::size_t k = 0; k < keys.size(); ++k) {
      if (k % 7 != static_cast<std::size_t>(round) % 7 && k % 11 != static_cast<std::size_t>(round) % 11) continue;
      bool newly = false;
      ++*map.try_emplace_marked(keys[k], hash_key_bytes(keys[k]), newly).first;
      CHECK(newly);
      marked.insert(keys[k]);
    }
    // Some marks cleared one by one, some entries erased and made again (unmarked).
    for (std::size_t k = static_cast<std::size_t>(round); k < keys.size(); k += 97) {
      if (round % 2) {
        map.unmark(keys[k], hash_key_bytes(keys[k]));
      } else {
        map.erase(keys[k], hash_key_bytes(keys[k]));
        map.get_or_insert(keys[k], hash_key_bytes(keys[k]));
      }
      marked.erase(keys[k]);
    }
    for (const std::string& k : keys) {
      if (!map.contains(k, hash_key_bytes(k))) continue;
      CHECK(map.marked(k, hash_key_bytes(k)) == (marked.count(k) == 1));
    }
    for (std::uint32_t g = 0; g < max_p; ++g) map.unmark_group(g);
    for (const std::string& k : keys) CHECK_FALSE(map.marked(k, hash_key_bytes(k)));
  }
}

// Deferred takes (ChangedEntries::take_logs) leave a group's marks pending under the epoch it
// left (begin_pending) until a resolver clears them (resolve_pending), or give them up
// (abandon_pending: stale), mixed with whole-group unmarks. Through many rounds, an entry
// reads as marked exactly when it changed since the last take (else a change would go
// unrecorded, and a delta miss it), and a pending entry changed before it is resolved counts
// as newly marked.
TEST_CASE("KeyedMap deferred takes keep marks pending, then resolved or stale", "[state][keyed_map]") {
  const std::uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  KeyedMap<std::int64_t> map(key_group_range(0, 1, max_p), max_p);
  std::vector<std::string> keys;
  for (int k = 0; k < 2000; ++k)
    keys.push_back(k % 3 ? "k" + std::to_string(k) : "a long key of more than fifteen bytes " + std::to_string(k));
  std::set<std::string> marked; // changed since the last take
  std::size_t resolved_rounds = 0, abandoned_rounds = 0, whole_rounds = 0;
  for (int round = 0; round < 60; ++round) {
    for (int n = 0; n < 300; ++n) {
      const std::string& k = keys[rng() % keys.size()];
      if (rng() % 5 == 0) {
        map.erase(k, hash_key_bytes(k));
        marked.erase(k);
        continue;
      }
      bool newly = false;
      ++*map.try_emplace_marked(k, hash_key_bytes(k), newly).first;
      CHECK(newly == (marked.count(k) == 0));
      marked.insert(k);
    }
    // The take: per group, deferred (pending) or whole, as a checkpoint decides.
    std::map<std::uint32_t, std::uint8_t> pending;
    for (std::uint32_t g = 0; g < max_p; ++g) {
      if (rng() % 4 == 0) {
        map.unmark_group(g);
        ++whole_rounds;
      } else if (const std::uint8_t p = map.begin_pending(g)) {
        pending[g] = p;
      } else {
        map.unmark_group(g); // no epoch free: whole
      }
    }
    std::set<std::string> taken = std::exchange(marked, {});
    // The task changes some entries before the take is resolved: newly marked, pending or not.
    std::set<std::string> changed_since;
    for (int n = 0; n < 50; ++n) {
      const std::string& k = keys[rng() % keys.size()];
      if (pending.count(map.key_group_of(hash_key_bytes(k)))) continue; // frozen until resolved
      bool newly = false;
      map.try_emplace_marked(k, hash_key_bytes(k), newly);
      CHECK(newly == (changed_since.count(k) == 0));
      changed_since.insert(k);
    }
    // Resolved (every logged key found once as pending, then no more) or abandoned.
    const bool resolve = rng() % 3 != 0;
    for (const std::string& k : taken) {
      const std::uint32_t g = map.key_group_of(hash_key_bytes(k));
      auto p = pending.find(g);
      if (p == pending.end() || !resolve) continue;
      bool was = false;
      const std::int64_t* v = map.resolve_pending(k, hash_key_bytes(k), p->second, was);
      REQUIRE(v != nullptr);
      CHECK(was);
      map.resolve_pending(k, hash_key_bytes(k), p->second, was);
      CHECK_FALSE(was);
    }
    if (!resolve)
      for (const auto& [g, p] : pending) map.abandon_pending(g, p);
    ++(resolve ? resolved_rounds : abandoned_rounds);
    marked = changed_since;
    for (const std::string& k : keys) {
      if (!map.contains(k, hash_key_bytes(k))) continue;
      INFO("round " << round << ", key " << k);
      CHECK(map.marked(k, hash_key_bytes(k)) == (marked.count(k) == 1));
    }
  }
  CHECK(resolved_rounds > 10);
  CHECK(abandoned_rounds > 5);
  CHECK(whole_rounds > 100);
}

TEST_CASE("KeyedMap reserves a table of any capacity, not a power of two", "[state][keyed_map]") {
  // One key group: a restore reserves a group's table for the entries its segment holds. At
  // 257 k entries a power of two was 49% full (twice the memory for the kernel to clear).
  for (std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{100}, std::size_t{12345}, std::size_t{257813}}) {
    INFO("entries " << n);
    std::vector<Key> keys = make_keys(n, n);
    KeyedMap<std::int64_t> map({0, 1}, 1);
    const std::size_t empty = map.memory_bytes();
    map.reserve_group(0, n);
    const std::size_t reserved = map.memory_bytes() - empty;
    // About n / 0.75 slots of 32 bytes (at least 8), rounded up to a size class: at most 1/8 more.
    CHECK(reserved >= n * 4 / 3 * 32);
    CHECK(reserved <= (n * 4 / 3 * 9 / 8 + 8) * 32);
    std::size_t mismatches = 0;
    for (std::size_t k = 0; k < n; ++k) {
      bool inserted = false;
      map.get_or_insert(keys[k].bytes, keys[k].hash, &inserted) = static_cast<std::int64_t>(k);
      mismatches += !inserted;
    }
    // No growth: the table holds them all at 75% (long keys take memory of their own).
    std::size_t long_key_bytes = 0;
    for (const Key& k : keys) long_key_bytes += k.bytes.size() > 15 ? k.bytes.size() : 0;
    CHECK(map.memory_bytes() - empty - reserved <= 2 * long_key_bytes + 4096);
    // Entries whose probes wrap past the table's end are found and erased as the others.
    for (std::size_t k = 0; k < n; k += 2) mismatches += !map.erase(keys[k].bytes, keys[k].hash);
    for (std::size_t k = 0; k < n; ++k) {
      const std::int64_t* v = map.find(keys[k].bytes, keys[k].hash);
      mismatches += k % 2 == 0 ? v != nullptr : (v == nullptr || *v != static_cast<std::int64_t>(k));
    }
    CHECK(mismatches == 0);
    CHECK(map.size() == n / 2);
  }
}

TEST_CASE("KeyedMap gives groups of about the same size tables of the same size", "[state][keyed_map]") {
  // A deferred snapshot's copies of groups reuse each other's memory only when the tables'
  // sizes are equal (state/recycled_memory.hpp).
  auto reserved = [](std::size_t n) {
    KeyedMap<std::int64_t> map({0, 1}, 1);
    const std::size_t empty = map.memory_bytes();
    map.reserve_group(0, n);
    return map.memory_bytes() - empty;
  };
  CHECK(reserved(256500) == reserved(258000));
  CHECK(reserved(256500) == reserved(259100));
  CHECK(reserved(76000) == reserved(78000));
  CHECK(reserved(1000) < reserved(2000));
}
