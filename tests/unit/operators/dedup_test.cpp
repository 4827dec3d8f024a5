#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "harness.hpp"
#include "operators/partition_key.hpp"
#include "state/key_group.hpp"

using streamctl::testing::Harness;
using streamctl::testing::OperatorRun;
using streamctl::testing::single_operator_pipeline;
using Lines = std::vector<std::string>;

namespace {

std::string dedup_pipeline(const std::string& extra = "") {
  return single_operator_pipeline("type = \"dedup\"\nkey = [\"k\"]\nwithin = \"10s\"\n" + extra);
}

std::string rec(const std::string& k, std::int64_t ts, int n) {
  return "{\"k\":" + k + ",\"ts\":" + std::to_string(ts) + ",\"n\":" + std::to_string(n) + "}";
}

} // namespace

TEST_CASE("dedup drops repeats within the horizon and keeps them after it (event time)", "[operators][dedup]") {
  Harness h(dedup_pipeline());
  OperatorRun run(h, "op");
  run.records({rec("\"a\"", 0, 1), rec("\"a\"", 5000, 2), rec("\"b\"", 6000, 3), rec("\"a\"", 9999, 4),
               rec("\"a\"", 10000, 5), rec("\"b\"", 10001, 6), rec("\"a\"", 19999, 7), rec("\"a\"", 20000, 8)});
  run.finish();
  // 2 and 4 repeat the kept 1; 5 is `within` after it; 7 repeats 5 (the dropped records never
  // become the reference); 8 is `within` after 5.
  CHECK(run.out == Lines{rec("\"a\"", 0, 1), rec("\"b\"", 6000, 3), rec("\"a\"", 10000, 5), rec("\"a\"", 20000, 8)});
}

TEST_CASE("dedup passes kept records through unchanged, event time included", "[operators][dedup]") {
  Harness h(dedup_pipeline());
  OperatorRun run(h, "op");
  run.records({R"({"z":[1,{"q":null}],"k":"a","ts":7})"});
  CHECK(run.out == Lines{R"({"z":[1,{"q":null}],"k":"a","ts":7})"});
}

TEST_CASE("dedup compares out-of-order records with the latest kept one in both directions", "[operators][dedup]") {
  Harness h(dedup_pipeline());
  OperatorRun run(h, "op");
  run.records({rec("\"a\"", 20000, 1), rec("\"a\"", 12000, 2), rec("\"a\"", 10001, 3), rec("\"a\"", 10000, 4),
               rec("\"a\"", 9000, 5), rec("\"a\"", 29999, 6), rec("\"a\"", 30000, 7), rec("\"a\"", 21000, 8)});
  run.finish();
  // 2 and 3 are less than 10s before the kept 1: duplicates. 4 is 10s before it: kept, but the
  // reference stays at 20000, so 5 (11s before it) is kept too and 6 is still a duplicate of 1.
  // 7 is kept and becomes the reference; 8 is 9s before it.
  CHECK(run.out == Lines{rec("\"a\"", 20000, 1), rec("\"a\"", 10000, 4), rec("\"a\"", 9000, 5),
                         rec("\"a\"", 30000, 7)});
}

TEST_CASE("dedup forgets a key when the watermark passes its kept time + within", "[operators][dedup]") {
  Harness h(dedup_pipeline());
  SECTION("without a watermark the late repeat is a duplicate") {
    OperatorRun run(h, "op");
    run.records({rec("\"a\"", 1000, 1)});
    run.watermark(10999);
    run.records({rec("\"a\"", 5000, 2)});
    CHECK(run.out == Lines{rec("\"a\"", 1000, 1)});
  }
  SECTION("after it the state is gone: the (late) repeat passes") {
    OperatorRun run(h, "op");
    run.records({rec("\"a\"", 1000, 1)});
    run.watermark(11000);
    run.records({rec("\"a\"", 5000, 2)});
    CHECK(run.out == Lines{rec("\"a\"", 1000, 1), rec("\"a\"", 5000, 2)});
  }
  SECTION("a key whose reference moved on is not forgotten by its old expiry") {
    OperatorRun run(h, "op");
    run.records({rec("\"b\"", 0, 1), rec("\"b\"", 10000, 2)});
    run.watermark(10000); // the expiry of record 1, replaced by 20000
    run.records({rec("\"b\"", 12000, 3)});
    run.watermark(19999);
    run.records({rec("\"b\"", 15000, 4)}); // late, but the state of record 2 is still there
    run.watermark(20000);
    run.records({rec("\"b\"", 15000, 5)}); // late, and now forgotten
    CHECK(run.out == Lines{rec("\"b\"", 0, 1), rec("\"b\"", 10000, 2), rec("\"b\"", 15000, 5)});
  }
}

TEST_CASE("dedup uses processing time for records without event time", "[operators][dedup]") {
  Harness h(dedup_pipeline());
  OperatorRun run(h, "op");
  run.set_clock(1000);
  run.records({R"({"k":"a","n":1})", R"({"k":"a","n":2})"});
  run.set_clock(10999);
  run.records({R"({"k":"a","n":3})", R"({"k":"b","n":4})"});
  run.set_clock(11000);
  run.records({R"({"k":"a","n":5})"});
  run.set_clock(20999);
  run.records({R"({"k":"a","n":6})"});
  // The timers of "b" (kept at 10999) and "a" (kept at 11000) fire by 21000 and free their
  // state: with the clock set back (as after a wall-clock step) both pass again.
  run.processing_time(21000);
  run.set_clock(12000);
  run.records({R"({"k":"a","n":7})", R"({"k":"b","n":8})"});
  CHECK(run.out == Lines{R"({"k":"a","n":1})", R"({"k":"b","n":4})", R"({"k":"a","n":5})", R"({"k":"a","n":7})",
                         R"({"k":"b","n":8})"});
}

TEST_CASE("dedup treats a missing key field as the null key", "[operators][dedup]") {
  Harness h(dedup_pipeline());
  OperatorRun run(h, "op");
  run.records({R"({"x":1,"ts":0})", R"({"k":null,"ts":1})", R"({"k":"a","ts":2})", R"({"k":"null","ts":3})"});
  CHECK(run.out == Lines{R"({"x":1,"ts":0})", R"({"k":"a","ts":2})", R"({"k":"null","ts":3})"});
}

TEST_CASE("dedup keys on several fields, and 2 and 2.0 are one key", "[operators][dedup]") {
  Harness h(single_operator_pipeline("type = \"dedup\"\nkey = [\"a\", \"b\"]\nwithin = \"1m\""));
  OperatorRun run(h, "op");
  run.records({R"({"a":2,"b":"x","ts":0})", R"({"a":2,"b":"y","ts":1})", R"({"a":2,"b":"x","ts":2})",
               R"({"b":"x","a":2.0,"ts":3})", R"({"b":"x","ts":4})", R"({"a":null,"b":"x","ts":5})",
               R"({"a":"2","b":"x","ts":6})"});
  CHECK(run.out == Lines{R"({"a":2,"b":"x","ts":0})", R"({"a":2,"b":"y","ts":1})", R"({"b":"x","ts":4})",
                         R"({"a":"2","b":"x","ts":6})"});
}

TEST_CASE("bloom dedup drops repeats within the horizon of one or two generations", "[operators][dedup]") {
  Harness h(dedup_pipeline("method = \"bloom\""));
  OperatorRun run(h, "op");
  // Generations of 10s: [0, 10000) is 0, [10000, 20000) is 1, ...
  run.records({rec("\"a\"", 0, 1), rec("\"a\"", 9999, 2), rec("\"a\"", 15000, 3), rec("\"b\"", 19999, 4),
               rec("\"a\"", 25000, 5), rec("\"a\"", 27000, 6), rec("\"b\"", 21000, 7)});
  run.finish();
  // 2: same generation; 3: next generation, 15s on (the horizon reaches up to 2 × within);
  // 5: two generations after 1 (3 was not kept, so not remembered): kept; 6 repeats 5, 7 repeats 4.
  CHECK(run.out == Lines{rec("\"a\"", 0, 1), rec("\"b\"", 19999, 4), rec("\"a\"", 25000, 5)});
}

TEST_CASE("bloom dedup runs on processing time for records without event time", "[operators][dedup]") {
  Harness h(dedup_pipeline("method = \"bloom\""));
  OperatorRun run(h, "op");
  run.processing_time(1000000); // before any record: no generation yet
  run.set_clock(0);
  run.records({R"({"k":"a","n":1})", R"({"k":"a","n":2})"});
  run.set_clock(15000);
  run.records({R"({"k":"a","n":3})"}); // generation 1: generation 0 still has "a"
  run.processing_time(20000);          // generation 2: generation 0 is dropped
  run.set_clock(20000);
  run.records({R"({"k":"a","n":4})", R"({"k":"a","n":5})"});
  CHECK(run.out == Lines{R"({"k":"a","n":1})", R"({"k":"a","n":4})"});
}

TEST_CASE("bloom dedup: false positives on 100k distinct keys near the target rate", "[operators][dedup]") {
  Harness h(single_operator_pipeline("type = \"dedup\"\nkey = [\"k\"]\nwithin = \"1h\"\nmethod = \"bloom\"\n"
                                     "expected_keys = 100000\nfalse_positive_rate = 0.01"));
  OperatorRun run(h, "op");
  const int n = 100000;
  const std::int64_t hour = 3600000;
  auto batch = [&](const std::string& prefix, std::int64_t base) {
    Lines lines;
    lines.reserve(n);
    for (int i = 0; i < n; ++i) lines.push_back(rec("\"" + prefix + std::to_string(i) + "\"", base + i, i));
    return lines;
  };
  auto kept_of = [&](const Lines& lines) {
    std::size_t before = run.out.size();
    run.records(lines);
    return run.out.size() - before;
  };

  // Generation 0 fills each key group's filter with its share of the expected keys; while it
  // fills, its false positive rate stays below the target.
  std::size_t kept0 = kept_of(batch("a", 0));
  CHECK(kept0 <= n);
  CHECK(kept0 > n - n / 100);
  // The same keys one generation on are all duplicates: no false negatives.
  CHECK(kept_of(batch("a", hour)) == 0);
  // New keys against the full filter of generation 0: about 1% are taken for duplicates.
  std::size_t kept1 = kept_of(batch("b", hour + n));
  double rate = 1.0 - static_cast<double>(kept1) / n;
  INFO("measured false positive rate " << rate);
  CHECK(rate > 0.006);
  CHECK(rate < 0.016);
  // Two generations after the "a" keys were kept, they are forgotten.
  std::size_t kept3 = kept_of(batch("a", 3 * hour));
  CHECK(kept3 > n - n / 100);
}

TEST_CASE("dedup matches a reference at any batch size and subtask split", "[operators][dedup]") {
  Harness h(single_operator_pipeline("type = \"dedup\"\nkey = [\"k\", \"j\"]\nwithin = \"100ms\""));
  const std::int64_t within = 100, disorder = 60;
  std::mt19937_64 rng(20240611);

  // Records with a bounded disorder: each at most `disorder` behind the largest time so far,
  // and watermarks that never make a later record late.
  struct Segment {
    Lines lines;
    std::int64_t watermark;
  };
  std::vector<Segment> segments;
  Lines all;
  std::vector<std::pair<std::string, std::int64_t>> keyed; // reference key text, time
  std::int64_t clock = 1000000;
  int id = 0;
  while (id < 6000) {
    Segment seg;
    int length = std::uniform_int_distribution<int>(1, 2500)(rng);
    for (int step = 0; step < length && id < 6000; ++step, ++id) {
      clock += std::uniform_int_distribution<int>(0, 9)(rng);
      std::int64_t t = clock - std::uniform_int_distribution<std::int64_t>(0, disorder)(rng);
      int kv = std::uniform_int_distribution<int>(0, 40)(rng);
      int jv = std::uniform_int_distribution<int>(0, 1)(rng);
      std::string k = kv == 40 ? "" : kv % 2 == 0 ? "\"k\":" + std::to_string(kv) : "\"k\":\"s" + std::to_string(kv) + "\"";
      std::string line = "{" + (k.empty() ? std::string() : k + ",") + "\"j\":" + (jv ? "true" : "null") +
                         ",\"ts\":" + std::to_string(t) + ",\"id\":" + std::to_string(id) + "}";
      seg.lines.push_back(line);
      all.push_back(line);
      keyed.emplace_back((k.empty() ? std::string("null") : k) + "|" + std::to_string(jv), t);
    }
    seg.watermark = clock - disorder - 1;
    segments.push_back(std::move(seg));
  }

  // The reference: a plain map from key to the time of its latest kept record.
  Lines expected;
  std::map<std::string, std::int64_t> reference;
  for (std::size_t i = 0; i < all.size(); ++i) {
    auto [key, t] = keyed[i];
    auto it = reference.find(key);
    if (it != reference.end()) {
      std::int64_t kept = it->second;
      if ((t >= kept ? t - kept : kept - t) < within) continue;
      if (t > kept) it->second = t;
    } else {
      reference.emplace(key, t);
    }
    expected.push_back(all[i]);
  }
  REQUIRE(expected.size() < all.size());
  REQUIRE(expected.size() > all.size() / 4);

  // Which subtask of 3 owns each record's key.
  auto partition_key = streamctl::operators::PartitionKey::for_input(h.job().spec, h.node("op"), 0, h.names());
  REQUIRE(partition_key);
  const auto max_parallelism = static_cast<std::uint32_t>(h.job().spec.max_parallelism);
  auto subtask_of = [&](const std::string& line, int parallelism) {
    streamctl::state::Batch b = h.parse({line}, 0, 1);
    std::string bytes;
    partition_key->encode(b[0], h.names(), bytes);
    auto group = streamctl::state::key_group_of(streamctl::state::hash_key_bytes(bytes), max_parallelism);
    return streamctl::state::subtask_for_key_group(group, parallelism, max_parallelism);
  };

  auto sorted = [](Lines v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  for (std::size_t batch_size : {std::size_t{1}, std::size_t{7}, std::size_t{1024}}) {
    for (int parallelism : {1, 3}) {
      INFO("batch size " << batch_size << ", parallelism " << parallelism);
      std::vector<std::unique_ptr<OperatorRun>> runs;
      for (int s = 0; s < parallelism; ++s) runs.push_back(std::make_unique<OperatorRun>(h, "op", s, parallelism));
      std::vector<int> fed(static_cast<std::size_t>(parallelism), 0);
      for (const auto& seg : segments) {
        std::vector<Lines> parts(static_cast<std::size_t>(parallelism));
        for (const auto& line : seg.lines) parts[static_cast<std::size_t>(subtask_of(line, parallelism))].push_back(line);
        for (int s = 0; s < parallelism; ++s) {
          runs[static_cast<std::size_t>(s)]->records(parts[static_cast<std::size_t>(s)], 0, batch_size);
          runs[static_cast<std::size_t>(s)]->watermark(seg.watermark);
          fed[static_cast<std::size_t>(s)] += static_cast<int>(parts[static_cast<std::size_t>(s)].size());
        }
      }
      Lines out;
      for (auto& run : runs) {
        run->finish();
        out.insert(out.end(), run->out.begin(), run->out.end());
      }
      if (parallelism == 1) CHECK(out == expected); // one subtask keeps the input order
      if (parallelism == 3) CHECK(std::count(fed.begin(), fed.end(), 0) == 0);
      CHECK(sorted(out) == sorted(expected));
      CHECK(h.errors.errors.empty());
    }
  }
}

TEST_CASE("dedup rejects bad settings with their position", "[operators][dedup]") {
  auto error_of = [](const std::string& body) {
    try {
      Harness h(single_operator_pipeline(body));
    } catch (const streamctl::Error& e) {
      CHECK(e.kind() == streamctl::ErrorKind::Usage);
      return std::string(e.what());
    }
    FAIL("no error for: " << body);
    return std::string();
  };
  // The operator's body starts on line 6 of single_operator_pipeline's file.
  const std::string head = "type = \"dedup\"\nkey = [\"k\"]\n";
  CHECK_THAT(error_of(head + "within = \"0\""), Catch::Contains("test.toml:8:") && Catch::Contains("'within' must be more than 0"));
  CHECK_THAT(error_of(head), Catch::Contains("needs 'within'"));
  CHECK_THAT(error_of(head + "within = \"5 minutes\""), Catch::Contains("test.toml:8:"));
  CHECK_THAT(error_of(head + "within = \"1s\"\nmethod = \"fuzzy\""), Catch::Contains("test.toml:9:") && Catch::Contains("bloom"));
  CHECK_THAT(error_of(head + "within = \"1s\"\nfalse_positive_rate = 0.01"),
             Catch::Contains("test.toml:9:") && Catch::Contains("only with method = \"bloom\""));
  CHECK_THAT(error_of(head + "within = \"1s\"\nexpected_keys = 10"),
             Catch::Contains("test.toml:9:") && Catch::Contains("only with method = \"bloom\""));
  CHECK_THAT(error_of(head + "within = \"1s\"\nmethod = \"bloom\"\nfalse_positive_rate = 0.6"),
             Catch::Contains("test.toml:10:") && Catch::Contains("must be in (0, 0.5], got 0.6"));
  CHECK_THAT(error_of(head + "within = \"1s\"\nmethod = \"bloom\"\nfalse_positive_rate = 0"),
             Catch::Contains("test.toml:10:") && Catch::Contains("must be in (0, 0.5]"));
  CHECK_THAT(error_of(head + "within = \"1s\"\nmethod = \"bloom\"\nexpected_keys = 0"),
             Catch::Contains("test.toml:10:") && Catch::Contains("'expected_keys' must be at least 1"));
  CHECK_THAT(error_of(head + "within = \"1s\"\nmethod = \"bloom\"\nexpected_keys = 1000000000000000"),
             Catch::Contains("test.toml:10:") && Catch::Contains("GiB"));
  CHECK_THAT(error_of("type = \"dedup\"\nkey = []\nwithin = \"1s\""),
             Catch::Contains("test.toml:7:") && Catch::Contains("at least one field"));
  // Every problem of the node at once.
  std::string all = error_of("type = \"dedup\"\nkey = []\nwithin = \"0\"\nexpected_keys = 5");
  CHECK_THAT(all, Catch::Contains("test.toml:7:") && Catch::Contains("test.toml:8:") && Catch::Contains("test.toml:9:"));
  // Valid settings construct.
  CHECK_NOTHROW(Harness(single_operator_pipeline(head + "within = \"1s\"\nmethod = \"bloom\"\n"
                                                          "false_positive_rate = 0.5\nexpected_keys = 1")));
  CHECK_NOTHROW(Harness(single_operator_pipeline(head + "within = \"1s\"\nmethod = \"exact\"")));
}
