#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "state/key_group.hpp"
#include "state/owned_timers.hpp"
#include "state/state_codec.hpp"
#include "state/timer_service.hpp"

using namespace streamctl::state;

namespace {

constexpr std::uint32_t max_p = 64;

struct Fired {
  std::string key;
  std::uint64_t hash;
  std::int64_t timestamp;
  std::int64_t tag;
  bool operator==(const Fired&) const = default;
};

TimerService all_groups() {
  return TimerService(key_group_range(0, 1, max_p), max_p);
}

std::string key_of(int k) {
  // Short keys and, for every third, one longer than the 15 inline bytes.
  return k % 3 == 0 ? "a long timer key beyond fifteen bytes " + std::to_string(k)
                    : "k" + std::to_string(k);
}

std::vector<Fired> advance(TimerService& timers, std::int64_t watermark) {
  std::vector<Fired> fired;
  timers.advance_watermark(
      watermark, [&](std::string_view key, std::uint64_t hash, std::int64_t ts, std::int64_t tag) {
        fired.push_back(Fired{std::string(key), hash, ts, tag});
      });
  return fired;
}

} // namespace

TEST_CASE("event-time timers fire in timestamp order up to the watermark", "[state][timers]") {
  TimerService timers = all_groups();
  std::mt19937_64 rng(1);
  std::multiset<std::int64_t> pending;
  for (int k = 0; k < 2000; ++k) {
    std::string key = key_of(k);
    std::int64_t ts = static_cast<std::int64_t>(rng() % 10000) - 5000;
    CHECK(timers.register_event_time(key, hash_key_bytes(key), ts));
    pending.insert(ts);
  }
  CHECK(timers.size() == 2000);
  CHECK(timers.size(TimeDomain::EventTime) == 2000);
  CHECK(timers.next_event_time() == *pending.begin());
  CHECK_FALSE(timers.next_processing_time().has_value());
  CHECK(timers.current_watermark() == std::numeric_limits<std::int64_t>::min());

  std::int64_t last = std::numeric_limits<std::int64_t>::min();
  std::size_t total = 0;
  for (std::int64_t w = -6000; w <= 6000; w += 700) {
    auto fired = advance(timers, w);
    for (const auto& f : fired) {
      CHECK(f.timestamp <= w);
      CHECK(f.timestamp >= last);
      CHECK(f.hash == hash_key_bytes(f.key));
      last = f.timestamp;
    }
    total += fired.size();
    CHECK(timers.current_watermark() == w);
    auto next = timers.next_event_time();
    if (next) CHECK(*next > w);
  }
  CHECK(total == 2000);
  CHECK(timers.empty());
}

TEST_CASE("timers of equal timestamp fire in a fixed order", "[state][timers]") {
  std::vector<std::tuple<std::string, std::int64_t, std::int64_t>> timers_to_set;
  for (int k = 0; k < 300; ++k)
    timers_to_set.emplace_back(key_of(k), 100 + k % 3, k % 5);
  std::vector<Fired> first;
  for (int run = 0; run < 3; ++run) {
    std::mt19937_64 rng(static_cast<std::uint64_t>(run));
    std::shuffle(timers_to_set.begin(), timers_to_set.end(), rng);
    TimerService timers = all_groups();
    for (auto& [key, ts, tag] : timers_to_set)
      timers.register_event_time(key, hash_key_bytes(key), ts, tag);
    auto fired = advance(timers, 1000);
    REQUIRE(fired.size() == 300);
    if (run == 0)
      first = fired;
    else
      CHECK(fired == first); // registration order does not matter
  }
}

TEST_CASE("the same timer registered twice is one timer", "[state][timers]") {
  TimerService timers = all_groups();
  std::string key = "user-1";
  std::uint64_t h = hash_key_bytes(key);
  CHECK(timers.register_event_time(key, h, 10));
  CHECK_FALSE(timers.register_event_time(key, h, 10));
  CHECK(timers.register_event_time(key, h, 10, 1));   // another tag
  CHECK(timers.register_event_time(key, h, 11));      // another time
  CHECK(timers.register_processing_time(key, h, 10)); // another domain
  CHECK_FALSE(timers.register_processing_time(key, h, 10));
  std::string other = "user-2";
  CHECK(timers.register_event_time(other, hash_key_bytes(other), 10));
  CHECK(timers.size() == 5);
  CHECK(timers.contains(TimeDomain::EventTime, key, h, 10, 1));
  CHECK_FALSE(timers.contains(TimeDomain::EventTime, key, h, 10, 2));

  auto fired = advance(timers, 10);
  CHECK(fired.size() == 3);
  CHECK(timers.size() == 2);
  std::vector<Fired> processing;
  timers.advance_processing_time(
      100, [&](std::string_view k, std::uint64_t hh, std::int64_t ts, std::int64_t tag) {
        processing.push_back(Fired{std::string(k), hh, ts, tag});
      });
  REQUIRE(processing.size() == 1);
  CHECK(processing[0] == Fired{key, h, 10, 0});
  CHECK(timers.current_processing_time() == 100);
  CHECK(timers.size() == 1); // the event-time timer at 11
}

TEST_CASE("deleted timers do not fire", "[state][timers]") {
  TimerService timers = all_groups();
  std::string a = "a", b = "a key that is longer than fifteen";
  std::uint64_t ha = hash_key_bytes(a), hb = hash_key_bytes(b);
  timers.register_event_time(a, ha, 5);
  timers.register_event_time(b, hb, 5);
  timers.register_event_time(a, ha, 7, 3);
  CHECK(timers.delete_event_time(a, ha, 5));
  CHECK_FALSE(timers.delete_event_time(a, ha, 5));
  CHECK_FALSE(timers.delete_event_time(a, ha, 7)); // tag 0 was never set
  CHECK_FALSE(timers.delete_processing_time(a, ha, 7, 3));
  CHECK(timers.size() == 2);
  auto fired = advance(timers, 10);
  REQUIRE(fired.size() == 2);
  CHECK(fired[0].key == b);
  CHECK(fired[1] == Fired{a, ha, 7, 3});
  // Deleted, then registered again: fires once.
  timers.register_event_time(a, ha, 20);
  timers.delete_event_time(a, ha, 20);
  timers.register_event_time(a, ha, 20);
  CHECK(advance(timers, 30).size() == 1);
  CHECK(timers.empty());
}

TEST_CASE("timers registered while firing fire in the same call when due", "[state][timers]") {
  TimerService timers = all_groups();
  std::string key = "session";
  std::uint64_t h = hash_key_bytes(key);
  timers.register_event_time(key, h, 10);
  timers.register_event_time(key, h, 50);
  std::vector<std::int64_t> fired;
  timers.advance_watermark(
      30, [&](std::string_view k, std::uint64_t hh, std::int64_t ts, std::int64_t) {
        fired.push_back(ts);
        if (ts == 10) {
          timers.register_event_time(k, hh, 20); // due: fires in this call
          timers.register_event_time(k, hh, 40); // not due
          timers.register_event_time(k, hh, 5);  // already past: fires next
          timers.delete_event_time(k, hh, 50);   // deleting another timer is fine
        }
      });
  CHECK(fired == std::vector<std::int64_t>{10, 5, 20});
  CHECK(timers.next_event_time() == 40);
  CHECK(timers.size() == 1);

  // A watermark below the current one fires nothing new, and timers at or below the current
  // watermark fire at the next advance.
  timers.register_event_time(key, h, 25);
  auto late = advance(timers, 0);
  REQUIRE(late.size() == 1);
  CHECK(late[0].timestamp == 25);
  CHECK(timers.current_watermark() == 30);
}

TEST_CASE("a callback that throws leaves the service usable", "[state][timers]") {
  TimerService timers = all_groups();
  std::string key = "k";
  std::uint64_t h = hash_key_bytes(key);
  timers.register_event_time(key, h, 1);
  timers.register_event_time(key, h, 2);
  CHECK_THROWS_AS(timers.advance_watermark(5, [](std::string_view, std::uint64_t, std::int64_t,
                                                 std::int64_t) { throw std::runtime_error("x"); }),
                  std::runtime_error);
  CHECK(timers.size() == 1); // the timer being fired was consumed
  CHECK(advance(timers, 5).size() == 1);
}

TEST_CASE("timers are visited by key group", "[state][timers]") {
  const KeyGroupRange range = key_group_range(1, 3, max_p);
  TimerService timers(range, max_p);
  std::map<std::uint32_t, std::set<std::tuple<int, std::string, std::int64_t, std::int64_t>>>
      expected;
  int owned = 0;
  for (int k = 0; owned < 3000; ++k) {
    std::string key = key_of(k);
    std::uint64_t h = hash_key_bytes(key);
    std::uint32_t kg = key_group_of(h, max_p);
    if (!range.contains(kg)) continue;
    ++owned;
    timers.register_event_time(key, h, k, k % 4);
    expected[kg].emplace(0, key, k, k % 4);
    if (k % 2 == 0) {
      timers.register_processing_time(key, h, 1000 + k);
      expected[kg].emplace(1, key, 1000 + k, 0);
    }
  }
  std::size_t total = 0;
  for (std::uint32_t kg = range.first; kg < range.end; ++kg) {
    std::set<std::tuple<int, std::string, std::int64_t, std::int64_t>> seen;
    timers.for_each_in_group(kg, [&](const TimerView& t) {
      CHECK(key_group_of(t.hash, max_p) == kg);
      CHECK(t.hash == hash_key_bytes(t.key));
      CHECK(
          seen.emplace(static_cast<int>(t.domain), std::string(t.key), t.timestamp, t.tag).second);
    });
    CHECK(seen == expected[kg]);
    total += seen.size();
  }
  CHECK(total == timers.size());
}

TEST_CASE("timers agree with an ordered set under random operations", "[state][timers]") {
  using Timer = std::tuple<std::int64_t, std::uint64_t, std::int64_t, std::string>;
  TimerService timers = all_groups();
  std::set<Timer> reference[2];
  std::mt19937_64 rng(9);
  std::vector<std::string> keys;
  for (int k = 0; k < 500; ++k)
    keys.push_back(key_of(k));
  std::int64_t now[2] = {0, 0};
  for (int op = 0; op < 60000; ++op) {
    int d = static_cast<int>(rng() % 2);
    auto domain = static_cast<TimeDomain>(d);
    const std::string& key = keys[rng() % keys.size()];
    std::uint64_t h = hash_key_bytes(key);
    std::int64_t ts = now[d] + static_cast<std::int64_t>(rng() % 200) - 20;
    std::int64_t tag = static_cast<std::int64_t>(rng() % 3);
    int what = static_cast<int>(rng() % 20);
    if (what < 12) {
      bool added = domain == TimeDomain::EventTime
                       ? timers.register_event_time(key, h, ts, tag)
                       : timers.register_processing_time(key, h, ts, tag);
      REQUIRE(added == reference[d].emplace(ts, h, tag, key).second);
    } else if (what < 17) {
      bool removed = domain == TimeDomain::EventTime
                         ? timers.delete_event_time(key, h, ts, tag)
                         : timers.delete_processing_time(key, h, ts, tag);
      REQUIRE(removed == (reference[d].erase(Timer(ts, h, tag, key)) == 1));
    } else {
      now[d] += static_cast<std::int64_t>(rng() % 30);
      std::vector<Timer> fired;
      auto collect = [&](std::string_view k, std::uint64_t hh, std::int64_t t, std::int64_t g) {
        fired.emplace_back(t, hh, g, std::string(k));
      };
      if (domain == TimeDomain::EventTime)
        timers.advance_watermark(now[d], collect);
      else
        timers.advance_processing_time(now[d], collect);
      std::vector<Timer> due;
      while (!reference[d].empty() && std::get<0>(*reference[d].begin()) <= now[d]) {
        due.push_back(*reference[d].begin());
        reference[d].erase(reference[d].begin());
      }
      // The reference orders by (timestamp, hash, tag, key), as the service does.
      REQUIRE(fired == due);
    }
    REQUIRE(timers.size(TimeDomain::EventTime) == reference[0].size());
    REQUIRE(timers.size(TimeDomain::ProcessingTime) == reference[1].size());
  }
}

namespace {

void many_timers(std::size_t n, bool report) {
  TimerService timers = all_groups();
  std::mt19937_64 rng(11);
  std::vector<std::string> keys(n);
  std::vector<std::uint64_t> hashes(n);
  for (std::size_t k = 0; k < n; ++k) {
    keys[k] = "u" + std::to_string(k);
    hashes[k] = hash_key_bytes(keys[k]);
  }
  std::vector<std::int64_t> when(n);
  for (auto& t : when)
    t = static_cast<std::int64_t>(rng() % 100000);
  auto start = std::chrono::steady_clock::now();
  for (std::size_t k = 0; k < n; ++k)
    timers.register_event_time(keys[k], hashes[k], when[k]);
  // Dedup and deletion at scale: every tenth registered again, every seventh deleted and
  // registered again.
  std::size_t duplicates = 0;
  for (std::size_t k = 0; k < n; k += 10)
    duplicates += timers.register_event_time(keys[k], hashes[k], when[k]) ? 1 : 0;
  for (std::size_t k = 0; k < n; k += 7) {
    REQUIRE(timers.delete_event_time(keys[k], hashes[k], when[k]));
    REQUIRE(timers.register_event_time(keys[k], hashes[k], when[k]));
  }
  CHECK(duplicates == 0);
  REQUIRE(timers.size() == n);
  std::size_t fired = 0;
  std::int64_t last = -1;
  bool ordered = true;
  for (std::int64_t w = 0; w <= 100000; w += 1000)
    timers.advance_watermark(w,
                             [&](std::string_view, std::uint64_t, std::int64_t ts, std::int64_t) {
                               ordered = ordered && ts >= last;
                               last = ts;
                               ++fired;
                             });
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(ordered);
  CHECK(fired == n);
  CHECK(timers.empty());
  if (report) WARN(n << " timers registered, deleted and fired in " << seconds << " s");
}

} // namespace

TEST_CASE("100k timers", "[state][timers]") {
  many_timers(100000, false);
}

// Hidden, and outside [state] so that "[state]" stays quick: run it with "[perf]".
TEST_CASE("1M timers (performance sanity)", "[perf][.]") {
  many_timers(1000000, true);
}

TEST_CASE("owned timers read a key group's timers, and refuse one of another group", "[timer_service]") {
  TimerService timers = all_groups();
  // Two keys of different groups.
  std::string a = key_of(1), b;
  const std::uint32_t group_a = key_group_of(hash_key_bytes(a), max_p);
  for (int k = 2; b.empty(); ++k)
    if (key_group_of(hash_key_bytes(key_of(k)), max_p) != group_a) b = key_of(k);
  const std::uint32_t group_b = key_group_of(hash_key_bytes(b), max_p);
  REQUIRE(timers.register_event_time(a, hash_key_bytes(a), 100, 7));
  REQUIRE(timers.register_processing_time(a, hash_key_bytes(a), 200, 8));
  std::string segment;
  StateWriter(segment).timers(timers, group_a);

  OwnedTimers owned;
  StateReader r(segment);
  REQUIRE(owned.read_group(r, group_a, max_p));
  CHECK(r.at_end());
  TimerService again = all_groups();
  owned.register_all(again);
  CHECK(again.size(TimeDomain::EventTime) == 1);
  CHECK(again.size(TimeDomain::ProcessingTime) == 1);

  // The same bytes read as group b's: refused, nothing added.
  OwnedTimers refused;
  StateReader wrong(segment);
  auto read = refused.read_group(wrong, group_b, max_p);
  REQUIRE_FALSE(read);
  CHECK(read.error() == "a timer of another key group");
  TimerService none = all_groups();
  refused.register_all(none);
  CHECK(none.empty());

  // Cut short: the reader's error.
  OwnedTimers cut;
  StateReader shorter(std::string_view(segment).substr(0, segment.size() - 1));
  CHECK_FALSE(cut.read_group(shorter, group_a, max_p));
}
