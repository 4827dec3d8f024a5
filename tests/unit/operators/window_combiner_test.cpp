#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "harness.hpp"
#include "operators/window_combiner.hpp"

using streamctl::operators::WindowCombiner;
using streamctl::testing::Harness;
using streamctl::testing::OperatorRun;
using streamctl::testing::single_operator_pipeline;

namespace {

using Lines = std::vector<std::string>;

Lines sorted(Lines v) {
  std::sort(v.begin(), v.end());
  return v;
}

std::string window_pipeline(const std::string& window, const std::string& aggregates,
                            const std::string& extra = "") {
  return single_operator_pipeline("type = \"window\"\nkey = [\"k\"]\nwindow = " + window +
                                  "\naggregates = " + aggregates + "\n" + extra);
}

std::unique_ptr<WindowCombiner> combiner_of(Harness& h) {
  return WindowCombiner::for_node(h.job().spec, h.node("op"), h.names());
}

// Sends `batch` through `combiner` as a router does: what it passes through goes on now.
void combine(WindowCombiner& combiner, const streamctl::state::Batch& batch, OperatorRun& window) {
  std::vector<std::uint32_t> passed;
  combiner.add(batch, passed);
  streamctl::state::Batch through;
  through.retain_memory_of(batch);
  for (std::uint32_t row : passed) through.add_shared(batch[row]);
  if (!through.empty()) window.batch(through);
}

// The partials of the panes `watermark` ends (all: INT64_MAX; take_all: nullopt), sent in
// batches of about `chunk` as the router does, then the watermark.
void take(WindowCombiner& combiner, std::optional<std::int64_t> watermark, OperatorRun& window,
          std::size_t chunk = SIZE_MAX) {
  for (bool more = true; more;) {
    streamctl::state::Batch partials;
    std::vector<std::uint64_t> hashes;
    more = watermark ? combiner.take(*watermark, partials, hashes, chunk)
                     : combiner.take_all(partials, hashes, chunk);
    REQUIRE(hashes.size() == partials.size());
    if (more) REQUIRE(partials.size() >= chunk);
    if (!partials.empty()) window.batch(partials);
  }
  if (watermark && *watermark != INT64_MAX) window.watermark(*watermark);
}

struct Outcome {
  Lines rows;
  Lines late;
  std::vector<std::string> errors; // reasons
};

// Random records with keys, times and values, in batches with watermarks between them: the
// window's rows, late records and bad records, fed directly or through a combiner.
Outcome run_random(const std::string& toml, std::uint64_t seed, bool through_combiner) {
  std::mt19937_64 rng(seed);
  std::mt19937_64 chunk_rng(seed + 1); // apart, so that both runs draw the same records
  const auto chunk = [&] { return chunk_rng() % 2 ? SIZE_MAX : std::size_t{1} + chunk_rng() % 20; };
  Harness h(toml);
  OperatorRun window(h, "op");
  auto combiner = through_combiner ? combiner_of(h) : nullptr;
  if (through_combiner) REQUIRE(combiner != nullptr);
  std::int64_t now = 1000;
  std::int64_t watermark = INT64_MIN;
  for (int step = 0; step < 60; ++step) {
    Lines lines;
    const int n = static_cast<int>(rng() % 200);
    for (int k = 0; k < n; ++k) {
      now += static_cast<std::int64_t>(rng() % 7);
      // Some records are late (behind the watermark), some have a value that is not a number.
      const std::int64_t ts = now - static_cast<std::int64_t>(rng() % 40 == 0 ? rng() % 3000 : rng() % 200);
      const std::string v = rng() % 50 == 0 ? "\"x\"" : std::to_string(static_cast<std::int64_t>(rng() % 1000) - 300);
      lines.push_back("{\"k\":\"k" + std::to_string(rng() % 23) + "\",\"ts\":" + std::to_string(ts) +
                      ",\"v\":" + v + ",\"u\":" + std::to_string(rng() % 11) + "}");
    }
    auto batch = h.parse(lines, 0, lines.size(), "ts");
    if (combiner)
      combine(*combiner, batch, window);
    else if (!batch.empty())
      window.batch(batch);
    if (rng() % 3 == 0) {
      watermark = std::max(watermark, now - 300);
      if (combiner)
        take(*combiner, watermark, window, chunk());
      else
        window.watermark(watermark);
    }
    // A barrier or a full table: everything goes, the watermark unchanged. (Drawn in both runs,
    // so that they see the same records.)
    if (rng() % 9 == 0 && combiner) take(*combiner, std::nullopt, window, chunk());
  }
  if (combiner) take(*combiner, INT64_MAX, window, chunk());
  window.finish();
  Outcome o{sorted(window.out), sorted(window.late), {}};
  for (const auto& e : h.errors.errors) o.errors.push_back(e.reason);
  std::sort(o.errors.begin(), o.errors.end());
  return o;
}

} // namespace

TEST_CASE("partial aggregates combined before the key exchange give the rows the records give",
          "[operators][window][combiner]") {
  const std::string aggregates =
      "{ n = \"count()\", s = \"sum(v)\", lo = \"min(v)\", hi = \"max(v)\", mean = \"avg(v)\", "
      "users = \"count_distinct(u)\", about = \"approx_count_distinct(u)\", top = \"top_k(u, 3)\" }";
  const std::string window = GENERATE(std::string("{ kind = \"tumbling\", size = \"100ms\" }"),
                                      std::string("{ kind = \"sliding\", size = \"300ms\", slide = \"100ms\" }"));
  const std::string extra = GENERATE(std::string(""), std::string("late_output = \"late\"\n"));
  const std::string toml = window_pipeline(window, aggregates, extra);
  for (int k = 0; k < 4; ++k) {
    const std::uint64_t seed = std::random_device{}();
    INFO("window " << window << ", " << extra << "seed " << seed);
    const Outcome direct = run_random(toml, seed, false);
    const Outcome combined = run_random(toml, seed, true);
    REQUIRE(!direct.rows.empty());
    CHECK(combined.rows == direct.rows);
    CHECK(combined.late == direct.late);
    CHECK(combined.errors == direct.errors);
  }
}

TEST_CASE("a combiner sends fewer records than it takes, and holds none after take_all",
          "[operators][window][combiner]") {
  Harness h(window_pipeline("{ kind = \"tumbling\", size = \"1s\" }", "{ n = \"count()\" }"));
  auto combiner = combiner_of(h);
  REQUIRE(combiner);
  Lines lines;
  for (int k = 0; k < 1000; ++k)
    lines.push_back("{\"k\":" + std::to_string(k % 10) + ",\"ts\":" + std::to_string(k) + "}");
  auto batch = h.parse(lines, 0, lines.size(), "ts");
  std::vector<std::uint32_t> passed;
  combiner->add(batch, passed);
  CHECK(passed.empty());
  CHECK(combiner->entries() == 10);
  streamctl::state::Batch partials;
  std::vector<std::uint64_t> hashes;
  combiner->take(999, partials, hashes); // the pane [0, 1000) has not ended
  CHECK(partials.empty());
  combiner->take_all(partials, hashes);
  CHECK(partials.size() == 10);
  CHECK(combiner->entries() == 0);
  // The watermark taken stays: a record of a pane it ended passes through.
  auto late = h.parse({R"({"k":1,"ts":5})"}, 0, 1, "ts");
  combiner->take(1000, partials, hashes);
  combiner->add(late, passed);
  CHECK(passed == std::vector<std::uint32_t>{0});
}

TEST_CASE("a combiner's partials come in chunks of whole key groups, each key once",
          "[operators][window][combiner]") {
  Harness h(window_pipeline("{ kind = \"tumbling\", size = \"1s\" }",
                            "{ n = \"count()\", users = \"count_distinct(u)\" }"));
  auto combiner = combiner_of(h);
  REQUIRE(combiner);
  Lines lines;
  for (int k = 0; k < 3000; ++k)
    lines.push_back("{\"k\":" + std::to_string(k % 1000) + ",\"ts\":" + std::to_string(k % 2000) +
                    ",\"u\":" + std::to_string(k % 7) + "}");
  auto batch = h.parse(lines, 0, lines.size(), "ts");
  std::vector<std::uint32_t> passed;
  combiner->add(batch, passed);
  REQUIRE(combiner->entries() == 2000); // 1000 keys in each of two panes
  const auto key_field = h.names().intern(streamctl::operators::kPartialKeyField);
  std::vector<std::string> keys;
  int calls = 0;
  for (bool more = true; more; ++calls) {
    streamctl::state::Batch partials;
    std::vector<std::uint64_t> hashes;
    more = combiner->take(1000, partials, hashes, 100); // the first pane only
    if (more) CHECK(partials.size() >= 100);
    for (const auto& record : partials)
      keys.emplace_back(record.find(key_field)->str());
  }
  CHECK(calls > 5);
  CHECK(keys.size() == 1000);
  std::sort(keys.begin(), keys.end());
  CHECK(std::unique(keys.begin(), keys.end()) == keys.end());
  CHECK(combiner->entries() == 1000);
  // Left midway through the second pane: the combiner still frees every block once (ASan).
  streamctl::state::Batch partials;
  std::vector<std::uint64_t> hashes;
  CHECK(combiner->take_all(partials, hashes, 100));
  CHECK(combiner->entries() < 1000);
}

TEST_CASE("records without event time, or with a bad key or argument, pass through the combiner",
          "[operators][window][combiner]") {
  Harness h(window_pipeline("{ kind = \"tumbling\", size = \"1s\" }", "{ s = \"sum(v)\" }"));
  auto combiner = combiner_of(h);
  REQUIRE(combiner);
  auto batch = h.parse({R"({"k":1,"v":2,"ts":5})", R"({"k":1,"v":"two","ts":5})", R"({"k":1,"v":2})"}, 0, 2, "ts");
  auto untimed = h.parse({R"({"k":1,"v":2})"}, 0, 1);
  std::vector<std::uint32_t> passed;
  combiner->add(batch, passed);
  combiner->add(untimed, passed);
  CHECK(passed == std::vector<std::uint32_t>{1, 0});
  CHECK(combiner->entries() == 1);
}

TEST_CASE("only windows whose merge equals adding in any order are combined",
          "[operators][window][combiner]") {
  auto combinable = [](const std::string& window, const std::string& aggregates, const std::string& extra = "") {
    Harness h(window_pipeline(window, aggregates, extra));
    return streamctl::operators::window_combinable(h.job().spec, h.node("op"));
  };
  const std::string tumbling = "{ kind = \"tumbling\", size = \"1s\" }";
  CHECK(combinable(tumbling, "{ n = \"count()\" }"));
  CHECK(combinable("{ kind = \"sliding\", size = \"3s\", slide = \"1s\" }", "{ n = \"count()\" }"));
  CHECK_FALSE(combinable("{ kind = \"sliding\", size = \"3s\", slide = \"2s\" }", "{ n = \"count()\" }"));
  CHECK_FALSE(combinable("{ kind = \"session\", gap = \"1s\" }", "{ n = \"count()\" }"));
  CHECK_FALSE(combinable(tumbling, "{ n = \"count()\", f = \"first(v)\" }"));
  CHECK_FALSE(combinable(tumbling, "{ l = \"last(v)\" }"));
  CHECK_FALSE(combinable(tumbling, "{ n = \"count()\" }", "allowed_lateness = \"1s\"\n"));
}

TEST_CASE("a partial the window cannot merge is a bad record naming its key and pane, never lost quietly",
          "[operators][window][combiner]") {
  Harness h(window_pipeline("{ kind = \"tumbling\", size = \"1s\" }", "{ lo = \"min(v)\" }"));
  OperatorRun window(h, "op");
  auto numbers = combiner_of(h);
  auto strings = combiner_of(h);
  // Two senders: one saw numbers for key 1, the other strings.
  combine(*numbers, h.parse({R"({"k":1,"v":3,"ts":5})"}, 0, 1, "ts"), window);
  combine(*strings, h.parse({R"({"k":1,"v":"a","ts":6})"}, 0, 1, "ts"), window);
  for (auto* sender : {numbers.get(), strings.get()}) { // each sender's barrier
    streamctl::state::Batch partials;
    std::vector<std::uint64_t> hashes;
    sender->take_all(partials, hashes);
    window.batch(partials);
  }
  window.finish();
  CHECK(window.out == Lines{R"({"k":1,"window_start":0,"window_end":1000,"lo":3})"});
  REQUIRE(h.errors.errors.size() == 1);
  CHECK(h.errors.errors[0].raw == R"({"k":1,"window_start":0,"window_end":1000})");
  CHECK_THAT(h.errors.errors[0].reason, Catch::Contains("min(v): cannot compare") &&
                                            Catch::Contains("combined before the key exchange"));
}

TEST_CASE("a window refuses a partial whose state is not an aggregates block",
          "[operators][window][combiner]") {
  Harness h(window_pipeline("{ kind = \"tumbling\", size = \"1s\" }", "{ n = \"count()\" }"));
  OperatorRun window(h, "op");
  auto combiner = combiner_of(h);
  streamctl::state::Batch partials;
  std::vector<std::uint64_t> hashes;
  combine(*combiner, h.parse({R"({"k":1,"ts":5})"}, 0, 1, "ts"), window);
  combiner->take_all(partials, hashes);
  REQUIRE(partials.size() == 1);
  // The same partial with its state cut short.
  streamctl::state::Batch damaged;
  const auto& r = partials[0];
  const std::string_view state = r.fields[1].value.str();
  streamctl::state::Field fields[2] = {r.fields[0], r.fields[1]};
  fields[1].value = streamctl::state::Value::string(damaged.copy_string(state.substr(0, state.size() - 3)));
  damaged.retain_memory_of(partials);
  damaged.add(fields, r.timestamp);
  window.batch(damaged);
  window.finish();
  CHECK(window.out.empty());
  REQUIRE(h.errors.errors.size() == 1);
  CHECK_THAT(h.errors.errors[0].reason, Catch::Contains("combined aggregate state"));
}

TEST_CASE("a combiner that makes a partial per record steps aside, and tries again later",
          "[operators][window][combiner]") {
  Harness h(window_pipeline("{ kind = \"tumbling\", size = \"1s\" }", "{ n = \"count()\" }"));
  auto combiner = combiner_of(h);
  REQUIRE(combiner);
  std::vector<std::uint32_t> passed;
  auto feed = [&](std::uint64_t records, std::uint64_t keys) {
    Lines lines;
    for (std::uint64_t k = 0; k < records; ++k)
      lines.push_back("{\"k\":" + std::to_string(k % keys) + ",\"ts\":5}");
    for (std::size_t at = 0; at < lines.size(); at += 4096) {
      auto batch = h.parse(lines, at, std::min(lines.size(), at + 4096), "ts");
      combiner->add(batch, passed);
    }
  };
  feed(WindowCombiner::probe_records, 1000); // 262 records a key: it pays
  CHECK_FALSE(combiner->bypassing());
  streamctl::state::Batch partials;
  std::vector<std::uint64_t> hashes;
  combiner->take_all(partials, hashes);
  feed(WindowCombiner::probe_records, WindowCombiner::probe_records); // a key a record
  CHECK(combiner->bypassing());
  combiner->bypassed(WindowCombiner::bypass_records - 1);
  CHECK(combiner->bypassing());
  combiner->bypassed(1);
  CHECK_FALSE(combiner->bypassing());
  CHECK(passed.empty());
}
