#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "harness.hpp"
#include "operators/partition_key.hpp"
#include "state/key_group.hpp"

using streamctl::testing::Harness;
using streamctl::testing::OperatorRun;
using streamctl::testing::single_operator_pipeline;

namespace {

using Lines = std::vector<std::string>;

Lines sorted(Lines v) {
  std::sort(v.begin(), v.end());
  return v;
}

// A window node `op` keyed on k, counting records and summing v.
std::string window_node(const std::string& window, const std::string& extra = "",
                        const std::string& aggregates = "{ n = \"count()\", s = \"sum(v)\" }") {
  return single_operator_pipeline("type = \"window\"\nkey = [\"k\"]\nwindow = " + window +
                                  "\naggregates = " + aggregates + "\n" + extra);
}

std::string row(const std::string& key, std::int64_t start, std::int64_t end, std::int64_t n,
                std::int64_t s) {
  return "{\"k\":" + key + ",\"window_start\":" + std::to_string(start) +
         ",\"window_end\":" + std::to_string(end) + ",\"n\":" + std::to_string(n) +
         ",\"s\":" + std::to_string(s) + "}";
}

} // namespace

// --- tumbling --------------------------------------------------------------------------------

TEST_CASE("tumbling windows fire when the watermark reaches their end", "[operators][window]") {
  Harness h(window_node("{ kind = \"tumbling\", size = \"1s\" }"));
  OperatorRun run(h, "op");
  // Out of order, and on both sides of the boundary at 1000 (999 = end - 1, 1000 = next start).
  run.records({R"({"ts":999,"k":"a","v":1})", R"({"ts":1000,"k":"a","v":2})",
               R"({"ts":0,"k":"a","v":4})", R"({"ts":1500,"k":"b","v":8})",
               R"({"ts":500,"k":"b","v":16})", R"({"ts":-1,"k":"a","v":32})"});
  CHECK(run.out.empty());
  run.watermark(-1); // [-1000, 0) ends at 0: not yet
  CHECK(run.out.empty());
  run.watermark(0);
  CHECK(run.out == Lines{row("\"a\"", -1000, 0, 1, 32)});
  run.watermark(999);
  CHECK(run.out.size() == 1);
  run.watermark(1000);
  CHECK(sorted(run.out) == sorted({row("\"a\"", -1000, 0, 1, 32), row("\"a\"", 0, 1000, 2, 5),
                                   row("\"b\"", 0, 1000, 1, 16)}));
  run.finish();
  CHECK(run.out.size() == 5);
  CHECK(sorted(Lines(run.out.begin() + 3, run.out.end())) ==
        sorted({row("\"a\"", 1000, 2000, 1, 2), row("\"b\"", 1000, 2000, 1, 8)}));
  CHECK(run.late.empty());
  CHECK(h.errors.errors.empty());
}

TEST_CASE("window rows carry event time end - 1", "[operators][window]") {
  Harness h(window_node("{ kind = \"tumbling\", size = \"1s\" }"));
  auto op = h.registry().make_operator(h.job().spec, h.node("op"), h.names());
  auto ctx = h.context("op", 0, 1);
  op->open(ctx);
  streamctl::state::Batch in = h.parse({R"({"ts":1234,"k":"a","v":1})"}, 0, 1, "ts");
  streamctl::state::Batch out;
  op->process(in, out);
  REQUIRE(out.empty());
  op->on_watermark(2000, out);
  REQUIRE(out.size() == 1);
  CHECK(out[0].timestamp == 1999);
}

TEST_CASE("a record late for its tumbling window goes to the late output unchanged",
          "[operators][window]") {
  Harness h(window_node("{ kind = \"tumbling\", size = \"1s\" }", "late_output = \"late\""));
  OperatorRun run(h, "op");
  run.records({R"({"ts":10,"k":"a","v":1})"});
  run.watermark(1000);
  REQUIRE(run.out == Lines{row("\"a\"", 0, 1000, 1, 1)});
  run.records({R"({"ts":999,"k":"a","v":2})", R"({"ts":1000,"k":"a","v":4})"});
  CHECK(run.late == Lines{R"({"ts":999,"k":"a","v":2})"});
  run.finish();
  CHECK(run.out == Lines{row("\"a\"", 0, 1000, 1, 1), row("\"a\"", 1000, 2000, 1, 4)});
  CHECK(h.errors.errors.empty());
}

TEST_CASE("without a late output a late record is a bad record that says why",
          "[operators][window]") {
  Harness h(window_node("{ kind = \"tumbling\", size = \"1s\" }"));
  OperatorRun run(h, "op", 0, 1, /*collect_late=*/false);
  run.watermark(5000);
  run.records({R"({"ts":4999,"k":"a","v":1})"});
  REQUIRE(h.errors.errors.size() == 1);
  CHECK(h.errors.errors[0].raw == R"({"ts":4999,"k":"a","v":1})");
  CHECK_THAT(h.errors.errors[0].reason,
             Catch::Contains("late record") && Catch::Contains("4999") && Catch::Contains("5000"));
  run.finish();
  CHECK(run.out.empty());
}

TEST_CASE("allowed_lateness re-emits each late update, then drops the window",
          "[operators][window]") {
  Harness h(window_node("{ kind = \"tumbling\", size = \"1s\" }",
                        "allowed_lateness = \"500ms\"\nlate_output = \"late\""));
  OperatorRun run(h, "op");
  run.records({R"({"ts":100,"k":"a","v":1})", R"({"ts":200,"k":"a","v":2})"});
  run.watermark(1000);
  REQUIRE(run.out == Lines{row("\"a\"", 0, 1000, 2, 3)});
  run.records({R"({"ts":10,"k":"a","v":4})"});
  CHECK(run.out.back() == row("\"a\"", 0, 1000, 3, 7));
  run.watermark(1499);
  CHECK(run.out.size() == 2); // nothing new fires
  run.records({R"({"ts":20,"k":"a","v":8})", R"({"ts":30,"k":"b","v":16})"});
  REQUIRE(run.out.size() == 4);
  CHECK(run.out[2] == row("\"a\"", 0, 1000, 4, 15));
  CHECK(run.out[3] == row("\"b\"", 0, 1000, 1, 16)); // a new window that had fired already
  run.watermark(1500);                               // end + allowed_lateness: dropped
  run.records({R"({"ts":40,"k":"a","v":32})"});
  CHECK(run.late == Lines{R"({"ts":40,"k":"a","v":32})"});
  run.finish();
  CHECK(run.out.size() == 4);
}

// --- sliding ---------------------------------------------------------------------------------

TEST_CASE("sliding windows add a record to each window that contains it", "[operators][window]") {
  Harness h(window_node("{ kind = \"sliding\", size = \"1s\", slide = \"500ms\" }"));
  OperatorRun run(h, "op");
  run.records({R"({"ts":700,"k":"a","v":1})", R"({"ts":500,"k":"a","v":2})",
               R"({"ts":499,"k":"a","v":4})", R"({"ts":-1,"k":"a","v":8})"});
  run.finish();
  CHECK(sorted(run.out) == sorted({row("\"a\"", -1000, 0, 1, 8), row("\"a\"", -500, 500, 2, 12),
                                   row("\"a\"", 0, 1000, 3, 7), row("\"a\"", 500, 1500, 2, 3)}));
}

// A watermark that passes many window ends at once fires each group's due windows in one scan
// (on_watermark): the rows must be those of a watermark that passes the ends one by one, no
// window still open may go, and the windows left must fire later as usual.
TEST_CASE("a watermark past many window ends fires the same rows as one end at a time",
          "[operators][window]") {
  const std::uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  Lines records;
  for (int k = 0; k < 3000; ++k)
    records.push_back("{\"ts\":" + std::to_string(rng() % 20000) + ",\"k\":" +
                      std::to_string(rng() % 200) + ",\"v\":1}");
  std::sort(records.begin(), records.end(), [](const std::string& a, const std::string& b) {
    return std::stoll(a.substr(6)) < std::stoll(b.substr(6));
  });
  Harness h(window_node("{ kind = \"sliding\", size = \"1s\", slide = \"200ms\" }"));
  OperatorRun stepwise(h, "op"), jumps(h, "op");
  std::int64_t next_end = 0;
  std::size_t at = 0;
  while (at < records.size()) {
    const std::size_t n = std::min<std::size_t>(records.size() - at, 1 + rng() % 400);
    Lines part(records.begin() + static_cast<std::ptrdiff_t>(at),
               records.begin() + static_cast<std::ptrdiff_t>(at + n));
    at += n;
    stepwise.records(part);
    jumps.records(part);
    const std::int64_t watermark = std::stoll(part.back().substr(6)) - 1;
    for (; next_end <= watermark; next_end += 200) stepwise.watermark(next_end);
    jumps.watermark(watermark);
    // Every window at or below the watermark has gone from both, and only those.
    CHECK(sorted(jumps.out) == sorted(stepwise.out));
  }
  stepwise.finish();
  jumps.finish();
  CHECK(sorted(jumps.out) == sorted(stepwise.out));
  CHECK(jumps.out.size() > 1000);
}

TEST_CASE("sliding windows whose size is not a multiple of the slide", "[operators][window]") {
  Harness h(window_node("{ kind = \"sliding\", size = \"1s\", slide = \"300ms\" }"));
  OperatorRun run(h, "op");
  // 0 lies in the windows starting at -900, -600, -300 and 0; 100 in those at -600, -300, 0.
  run.records({R"({"ts":0,"k":"a","v":1})", R"({"ts":100,"k":"b","v":1})"});
  run.finish();
  CHECK(sorted(run.out) == sorted({row("\"a\"", -900, 100, 1, 1), row("\"a\"", -600, 400, 1, 1),
                                   row("\"a\"", -300, 700, 1, 1), row("\"a\"", 0, 1000, 1, 1),
                                   row("\"b\"", -600, 400, 1, 1), row("\"b\"", -300, 700, 1, 1),
                                   row("\"b\"", 0, 1000, 1, 1)}));
}

TEST_CASE("a sliding record late for some windows only updates the others", "[operators][window]") {
  Harness h(window_node("{ kind = \"sliding\", size = \"1s\", slide = \"500ms\" }",
                        "late_output = \"late\""));
  OperatorRun run(h, "op");
  run.watermark(1000);
  // 700: [0, 1000) is late, [500, 1500) is not. 400: [-500, 500) and [0, 1000) are both late.
  run.records({R"({"ts":700,"k":"a","v":1})", R"({"ts":400,"k":"a","v":2})"});
  CHECK(run.late == Lines{R"({"ts":400,"k":"a","v":2})"});
  run.finish();
  CHECK(run.out == Lines{row("\"a\"", 500, 1500, 1, 1)});
}

// --- session ---------------------------------------------------------------------------------

TEST_CASE("a record bridging two sessions merges them", "[operators][window]") {
  Harness h(window_node("{ kind = \"session\", gap = \"100ms\" }"));
  OperatorRun run(h, "op");
  run.records(
      {R"({"ts":200,"k":"a","v":1})", R"({"ts":0,"k":"a","v":2})", R"({"ts":0,"k":"b","v":64})"});
  run.watermark(99);
  CHECK(run.out.empty());
  // 100 is exactly gap after 0 and gap before 200: one session from 0 to 200 + gap.
  run.records({R"({"ts":100,"k":"a","v":4})"});
  run.watermark(100);
  CHECK(run.out == Lines{row("\"b\"", 0, 100, 1, 64)});
  // 401 is more than gap after 200: a session of its own.
  run.records({R"({"ts":401,"k":"a","v":8})", R"({"ts":50,"k":"a","v":16})"});
  run.watermark(300);
  CHECK(run.out == Lines{row("\"b\"", 0, 100, 1, 64), row("\"a\"", 0, 300, 4, 23)});
  run.finish();
  CHECK(run.out.back() == row("\"a\"", 401, 501, 1, 8));
  CHECK(run.out.size() == 3);
}

TEST_CASE("a session that every record extends fires once, at its last record + gap",
          "[operators][window]") {
  Harness h(window_node("{ kind = \"session\", gap = \"100ms\" }"));
  OperatorRun run(h, "op");
  for (int t = 0; t <= 1000; t += 50) {
    run.records({"{\"ts\":" + std::to_string(t) + ",\"k\":\"a\",\"v\":1}"});
    run.watermark(t + 49); // always short of the session's end, t + 100
  }
  run.watermark(1099);
  CHECK(run.out.empty());
  run.watermark(1100);
  CHECK(run.out == Lines{row("\"a\"", 0, 1100, 21, 21)});
  run.finish();
  CHECK(run.out.size() == 1);
}

TEST_CASE("session lateness: re-emission on merge, then the late output", "[operators][window]") {
  Harness h(window_node("{ kind = \"session\", gap = \"100ms\" }",
                        "allowed_lateness = \"1s\"\nlate_output = \"late\""));
  OperatorRun run(h, "op");
  run.records({R"({"ts":0,"k":"a","v":1})"});
  run.watermark(450);
  REQUIRE(run.out == Lines{row("\"a\"", 0, 100, 1, 1)});
  // Touches the fired session: the grown session is still behind the watermark, so it shows.
  run.records({R"({"ts":100,"k":"a","v":2})"});
  CHECK(run.out.back() == row("\"a\"", 0, 200, 2, 3));
  // A fresh session behind the watermark but within allowed_lateness shows at once as well.
  run.records({R"({"ts":300,"k":"a","v":4})"});
  CHECK(run.out.back() == row("\"a\"", 300, 400, 1, 4));
  // A record that grows a fired session past the watermark waits for it again.
  run.records({R"({"ts":400,"k":"a","v":8})"});
  CHECK(run.out.size() == 3);
  run.watermark(500);
  CHECK(run.out.back() == row("\"a\"", 300, 500, 2, 12));
  run.watermark(1200); // 0..200 is dropped (200 + 1000 <= 1200), 300..500 is held
  run.records({R"({"ts":100,"k":"a","v":16})", R"({"ts":450,"k":"a","v":32})"});
  CHECK(run.late == Lines{R"({"ts":100,"k":"a","v":16})"});
  CHECK(run.out.back() == row("\"a\"", 300, 550, 3, 44));
  run.finish();
  CHECK(run.out.size() == 5);
}

// --- keys, values, bad records ----------------------------------------------------------------

TEST_CASE("a missing key field is the null key, and count(x) skips nulls", "[operators][window]") {
  Harness h(window_node("{ kind = \"tumbling\", size = \"1s\" }", "",
                        "{ n = \"count()\", c = \"count(v)\", s = \"sum(v)\" }"));
  OperatorRun run(h, "op");
  run.records({R"({"ts":1,"v":1})", R"({"ts":2,"k":null,"v":null})", R"({"ts":3,"k":null})",
               R"({"ts":4,"k":"a"})"});
  run.finish();
  CHECK(sorted(run.out) ==
        sorted({R"({"k":null,"window_start":0,"window_end":1000,"n":3,"c":1,"s":1})",
                R"({"k":"a","window_start":0,"window_end":1000,"n":1,"c":0,"s":null})"}));
}

TEST_CASE("a bad aggregate argument is a bad record and changes no window", "[operators][window]") {
  SECTION("tumbling") {
    Harness h(window_node("{ kind = \"tumbling\", size = \"1s\" }"));
    OperatorRun run(h, "op");
    run.records({R"({"ts":1,"k":"a","v":"ten"})", R"({"ts":2,"k":"a","v":3})",
                 R"({"ts":1500,"k":"b","v":"x"})"});
    run.finish();
    CHECK(run.out == Lines{row("\"a\"", 0, 1000, 1, 3)}); // no row at all for b
    REQUIRE(h.errors.errors.size() == 2);
    CHECK_THAT(h.errors.errors[0].reason, Catch::Contains("expected a number"));
  }
  SECTION("sliding") {
    Harness h(window_node("{ kind = \"sliding\", size = \"1s\", slide = \"500ms\" }"));
    OperatorRun run(h, "op");
    run.records({R"({"ts":600,"k":"a","v":"ten"})", R"({"ts":700,"k":"a","v":3})"});
    run.finish();
    CHECK(sorted(run.out) == sorted({row("\"a\"", 0, 1000, 1, 3), row("\"a\"", 500, 1500, 1, 3)}));
    CHECK(h.errors.errors.size() == 1);
  }
  SECTION("session") {
    Harness h(window_node("{ kind = \"session\", gap = \"1s\" }"));
    OperatorRun run(h, "op");
    run.records({R"({"ts":5000,"k":"a","v":"ten"})", R"({"ts":0,"k":"a","v":3})",
                 R"({"ts":500,"k":"a","v":"x"})"});
    run.finish();
    CHECK(run.out == Lines{row("\"a\"", 0, 1000, 1, 3)});
    CHECK(h.errors.errors.size() == 2);
  }
}

TEST_CASE("negative event times fall in epoch-aligned windows", "[operators][window]") {
  Harness h(window_node("{ kind = \"tumbling\", size = \"1s\" }"));
  OperatorRun run(h, "op");
  run.records({R"({"ts":-1,"k":"a","v":1})", R"({"ts":-1000,"k":"a","v":2})",
               R"({"ts":-1001,"k":"a","v":4})", R"({"ts":-2500,"k":"a","v":8})"});
  run.watermark(-1000);
  CHECK(sorted(run.out) ==
        sorted({row("\"a\"", -2000, -1000, 1, 4), row("\"a\"", -3000, -2000, 1, 8)}));
  run.finish();
  CHECK(run.out.back() == row("\"a\"", -1000, 0, 2, 3));
}

// A window's map key is its start as a zigzag varint, then the key; the operator writes the
// start into room left before the key bytes of the batch (1 to 9 bytes here, sliding windows
// writing several starts into the same room). Every record must count in its own windows.
TEST_CASE("window starts of every varint length count apart", "[operators][window]") {
  for (const char* window :
       {"{ kind = \"tumbling\", size = \"1s\" }", "{ kind = \"sliding\", size = \"1s\", slide = \"500ms\" }"}) {
    INFO(window);
    Harness h(window_node(window, "", "{ n = \"count()\" }"));
    OperatorRun run(h, "op");
    Lines records;
    std::map<std::string, std::int64_t> expected; // "key start" -> count
    const bool sliding = std::string(window).find("sliding") != std::string::npos;
    for (int bits = 0; bits <= 61; bits += 3)
      for (const std::int64_t sign : {1, -1})
        for (const char* key : {"\"a\"", "\"a key longer than fifteen bytes\""}) {
          const std::int64_t t = sign * ((std::int64_t{1} << bits) * 3 / 2);
          records.push_back("{\"ts\":" + std::to_string(t) + ",\"k\":" + key + "}");
          const std::int64_t slide = sliding ? 500 : 1000;
          std::int64_t last = t - ((t % slide) + slide) % slide;
          for (std::int64_t start = last; start > t - 1000; start -= slide)
            ++expected[std::string(key) + " " + std::to_string(start)];
        }
    run.records(records);
    run.finish();
    std::map<std::string, std::int64_t> got;
    for (const auto& line : run.out) {
      const auto k = line.find("\"k\":") + 4, ks = line.find(",\"window_start\":");
      const auto ss = ks + 16, se = line.find(",\"window_end\"");
      const auto n = line.find("\"n\":") + 4;
      got[line.substr(k, ks - k) + " " + line.substr(ss, se - ss)] += std::stoll(line.substr(n));
    }
    CHECK(got == expected);
    CHECK(h.errors.errors.empty());
  }
}

TEST_CASE("an event time beyond the supported range is a bad record", "[operators][window]") {
  Harness h(window_node("{ kind = \"tumbling\", size = \"1s\" }"));
  OperatorRun run(h, "op");
  run.records({R"({"ts":9223372036854775000,"k":"a","v":1})",
               R"({"ts":-9223372036854775000,"k":"a","v":1})"});
  run.finish();
  CHECK(run.out.empty());
  REQUIRE(h.errors.errors.size() == 2);
  CHECK_THAT(h.errors.errors[0].reason, Catch::Contains("outside the range"));
}

// The operator reuses the window start of the record before for a time in the same slide
// (without a division); a slide that reaches past the supported range must not pass that on
// to the times beyond the range. (2^62 - 1000 is the last time a 1s window takes.)
TEST_CASE("a time past the range in the slide of a time within it is a bad record",
          "[operators][window]") {
  Harness h(window_node("{ kind = \"tumbling\", size = \"1s\" }"));
  OperatorRun run(h, "op");
  const std::int64_t last = (std::int64_t{1} << 62) - 1000;
  run.records({"{\"ts\":" + std::to_string(last - 1) + ",\"k\":\"a\",\"v\":1}",
               "{\"ts\":" + std::to_string(last + 1) + ",\"k\":\"a\",\"v\":2}",
               "{\"ts\":" + std::to_string(last) + ",\"k\":\"a\",\"v\":4}"});
  run.finish();
  REQUIRE(h.errors.errors.size() == 1);
  CHECK_THAT(h.errors.errors[0].reason, Catch::Contains("outside the range"));
  const std::int64_t start = last - 1 - ((last - 1) % 1000);
  CHECK(run.out == Lines{row("\"a\"", start, start + 1000, 2, 5)});
}

// --- processing time, end of input --------------------------------------------------------------

TEST_CASE("records without event time are windowed by processing time", "[operators][window]") {
  SECTION("tumbling") {
    Harness h(window_node("{ kind = \"tumbling\", size = \"1s\" }"));
    OperatorRun run(h, "op");
    run.set_clock(1500);
    run.records({R"({"k":"a","v":1})", R"({"k":"a","v":2})"});
    run.set_clock(1999);
    run.records({R"({"k":"a","v":4})"});
    run.watermark(5000); // event time does not fire processing-time windows
    run.processing_time(1999);
    CHECK(run.out.empty());
    run.processing_time(2000);
    CHECK(run.out == Lines{row("\"a\"", 1000, 2000, 3, 7)});
    run.set_clock(2000);
    run.records({R"({"k":"a","v":8})"});
    run.finish(); // the end of input fires what is held
    CHECK(run.out == Lines{row("\"a\"", 1000, 2000, 3, 7), row("\"a\"", 2000, 3000, 1, 8)});
  }
  SECTION("session") {
    Harness h(window_node("{ kind = \"session\", gap = \"100ms\" }"));
    OperatorRun run(h, "op");
    run.set_clock(1000);
    run.records({R"({"k":"a","v":1})"});
    run.processing_time(1050);
    run.records({R"({"k":"a","v":2})"});
    run.processing_time(1149);
    CHECK(run.out.empty());
    run.processing_time(1150);
    CHECK(run.out == Lines{row("\"a\"", 1000, 1150, 2, 3)});
  }
}

TEST_CASE("the end of input fires every window still held", "[operators][window]") {
  for (const char* window : {"{ kind = \"tumbling\", size = \"1h\" }",
                             "{ kind = \"sliding\", size = \"1h\", slide = \"1h\" }",
                             "{ kind = \"session\", gap = \"1h\" }"}) {
    INFO(window);
    Harness h(window_node(window, "allowed_lateness = \"1d\""));
    OperatorRun run(h, "op");
    run.records({R"({"ts":0,"k":"a","v":1})", R"({"ts":10,"k":"b","v":2})"});
    run.watermark(5);
    run.set_clock(20);
    run.records({R"({"k":"c","v":4})"});
    run.finish();
    const bool session = std::string(window).find("session") != std::string::npos;
    CHECK(sorted(run.out) ==
          sorted({row("\"a\"", 0, 3600000, 1, 1),
                  session ? row("\"b\"", 10, 3600010, 1, 2) : row("\"b\"", 0, 3600000, 1, 2),
                  session ? row("\"c\"", 20, 3600020, 1, 4) : row("\"c\"", 0, 3600000, 1, 4)}));
  }
}

// --- configuration errors ------------------------------------------------------------------------

TEST_CASE("window configuration errors name the position", "[operators][window]") {
  // In single_operator_pipeline, `window = ...` is on line 8.
  auto fails_with = [](const std::string& window, const std::string& message,
                       const std::string& extra = "") {
    INFO(window);
    CHECK_THROWS_WITH(Harness(window_node(window, extra)),
                      Catch::Contains("test.toml:8:") && Catch::Contains(message));
  };
  fails_with("{ kind = \"tumbling\" }", "needs 'size'");
  fails_with("{ kind = \"tumbling\", size = \"0s\" }", "needs 'size', a duration above 0");
  fails_with("{ kind = \"tumbling\", size = \"1s\", gap = \"1s\" }", "'window.gap' does not apply");
  fails_with("{ kind = \"sliding\", size = \"1s\" }", "needs 'slide'");
  fails_with("{ kind = \"sliding\", size = \"1s\", slide = \"2s\" }", "must not exceed");
  fails_with("{ kind = \"session\", size = \"1s\" }", "needs 'gap'");
  fails_with("{ kind = \"session\", gap = \"1s\", slide = \"1s\" }",
             "'window.slide' does not apply");
  CHECK_THROWS_WITH(
      Harness(window_node("{ kind = \"tumbling\", size = \"1s\" }", "", "{ s = \"sm(v)\" }")),
      Catch::Contains("test.toml:9:") && Catch::Contains("did you mean 'sum'"));
  CHECK_THROWS_WITH(Harness(window_node("{ kind = \"tumbling\", size = \"1s\" }", "",
                                        "{ window_end = \"count()\" }")),
                    Catch::Contains("test.toml:9:") && Catch::Contains("window_end"));
}

// --- randomized reference check ------------------------------------------------------------------

namespace {

struct Input {
  std::string key; // JSON of the key: "\"k1\"" or "null"
  std::int64_t t;
  std::optional<std::int64_t> v;
  std::string line;
};

struct Step {
  std::vector<Input> records;
  std::int64_t watermark;
};

struct Agg {
  std::int64_t n = 0, c = 0;
  std::optional<std::int64_t> s, mx;
  void add(const Input& in) {
    ++n;
    if (!in.v) return;
    ++c;
    s = s.value_or(0) + *in.v;
    mx = mx ? std::max(*mx, *in.v) : *in.v;
  }
  void merge(const Agg& o) {
    n += o.n;
    c += o.c;
    if (o.s) s = s.value_or(0) + *o.s;
    if (o.mx) mx = mx ? std::max(*mx, *o.mx) : *o.mx;
  }
};

std::string opt(const std::optional<std::int64_t>& v) {
  return v ? std::to_string(*v) : "null";
}

std::string ref_row(const std::string& key, std::int64_t start, std::int64_t end, const Agg& a) {
  return "{\"k\":" + key + ",\"window_start\":" + std::to_string(start) +
         ",\"window_end\":" + std::to_string(end) + ",\"n\":" + std::to_string(a.n) +
         ",\"c\":" + std::to_string(a.c) + ",\"s\":" + opt(a.s) + ",\"mx\":" + opt(a.mx) + "}";
}

struct Expected {
  Lines out, late;
};

std::int64_t align_down(std::int64_t t, std::int64_t d) {
  std::int64_t m = t % d;
  return t - (m < 0 ? m + d : m);
}

// Tumbling (slide == size) and sliding windows, computed directly.
Expected reference_aligned(const std::vector<Step>& steps, std::int64_t size, std::int64_t slide,
                           std::int64_t lateness) {
  Expected e;
  std::map<std::pair<std::string, std::int64_t>, Agg> windows; // (key, start)
  std::int64_t w = INT64_MIN;
  auto advance = [&](std::int64_t to) {
    for (auto it = windows.begin(); it != windows.end();) {
      std::int64_t end = it->first.second + size;
      if (end > w && end <= to)
        e.out.push_back(ref_row(it->first.first, it->first.second, end, it->second));
      it = (to != INT64_MIN && end + lateness <= to) ? windows.erase(it) : std::next(it);
    }
    w = std::max(w, to);
  };
  for (const auto& step : steps) {
    for (const auto& in : step.records) {
      bool any = false;
      for (std::int64_t start = align_down(in.t, slide); start > in.t - size; start -= slide) {
        std::int64_t end = start + size;
        if (w != INT64_MIN && end + lateness <= w) continue;
        any = true;
        Agg& a = windows[{in.key, start}];
        a.add(in);
        if (end <= w) e.out.push_back(ref_row(in.key, start, end, a));
      }
      if (!any) e.late.push_back(in.line);
    }
    advance(step.watermark);
  }
  advance(INT64_MAX);
  return e;
}

Expected reference_sessions(const std::vector<Step>& steps, std::int64_t gap,
                            std::int64_t lateness) {
  struct Session {
    std::int64_t start, end;
    Agg agg;
  };
  Expected e;
  std::map<std::string, std::vector<Session>> sessions;
  std::int64_t w = INT64_MIN;
  auto advance = [&](std::int64_t to) {
    for (auto& [key, list] : sessions) {
      std::vector<Session> kept;
      for (auto& s : list) {
        if (s.end > w && s.end <= to) e.out.push_back(ref_row(key, s.start, s.end, s.agg));
        if (!(to != INT64_MIN && s.end + lateness <= to)) kept.push_back(s);
      }
      list = kept;
    }
    w = std::max(w, to);
  };
  for (const auto& step : steps) {
    for (const auto& in : step.records) {
      auto& list = sessions[in.key];
      Session merged{in.t, in.t + gap, {}};
      merged.agg.add(in);
      std::vector<Session> rest;
      bool touched = false;
      for (auto& s : list) {
        if (s.end >= in.t && s.start <= in.t + gap) {
          touched = true;
          merged.start = std::min(merged.start, s.start);
          merged.end = std::max(merged.end, s.end);
          merged.agg.merge(s.agg);
        } else {
          rest.push_back(s);
        }
      }
      if (!touched && w != INT64_MIN && in.t + gap + lateness <= w) {
        e.late.push_back(in.line);
        continue;
      }
      if (merged.end <= w) e.out.push_back(ref_row(in.key, merged.start, merged.end, merged.agg));
      rest.push_back(merged);
      list = rest;
    }
    advance(step.watermark);
  }
  advance(INT64_MAX);
  return e;
}

std::vector<Step> random_steps(std::uint32_t seed) {
  std::mt19937 rng(seed);
  auto uniform = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  std::vector<Step> steps;
  std::int64_t base = -3000;
  for (int k = 0; k < 60; ++k) {
    Step step;
    auto n = uniform(0, 25);
    for (std::int64_t r = 0; r < n; ++r) {
      Input in;
      auto key = uniform(0, 6);
      in.key = key == 6 ? "null" : "\"k" + std::to_string(key) + "\"";
      in.t = base + uniform(-2500, 1500);
      auto v = uniform(-5, 25);
      if (v > 20)
        in.v = std::nullopt;
      else
        in.v = v;
      in.line = "{\"ts\":" + std::to_string(in.t);
      if (key != 6 || uniform(0, 1) == 0) in.line += ",\"k\":" + in.key; // null or missing
      if (in.v)
        in.line += ",\"v\":" + std::to_string(*in.v);
      else if (v % 2 == 0)
        in.line += ",\"v\":null";
      in.line += "}";
      step.records.push_back(in);
    }
    base += uniform(0, 600);
    step.watermark = base - 500;
    steps.push_back(step);
  }
  return steps;
}

// Runs the steps through `parallelism` subtasks of node `op`, each fed the records whose key
// group it owns, in batches of `batch_size`; returns what all of them emitted.
Expected run_split(Harness& h, const std::vector<Step>& steps, std::size_t batch_size,
                   int parallelism) {
  auto partition_key =
      streamctl::operators::PartitionKey::for_input(h.job().spec, h.node("op"), 0, h.names());
  REQUIRE(partition_key);
  const auto max_parallelism = static_cast<std::uint32_t>(h.job().spec.max_parallelism);
  auto subtask_of = [&](const std::string& line) {
    streamctl::state::Batch b = h.parse({line}, 0, 1);
    std::string bytes;
    partition_key->encode(b[0], h.names(), bytes);
    auto group =
        streamctl::state::key_group_of(streamctl::state::hash_key_bytes(bytes), max_parallelism);
    return streamctl::state::subtask_for_key_group(group, parallelism, max_parallelism);
  };
  std::vector<std::unique_ptr<OperatorRun>> runs;
  for (int s = 0; s < parallelism; ++s)
    runs.push_back(std::make_unique<OperatorRun>(h, "op", s, parallelism));
  for (const auto& step : steps) {
    std::vector<Lines> per(static_cast<std::size_t>(parallelism));
    for (const auto& in : step.records)
      per[static_cast<std::size_t>(subtask_of(in.line))].push_back(in.line);
    for (int s = 0; s < parallelism; ++s) {
      runs[static_cast<std::size_t>(s)]->records(per[static_cast<std::size_t>(s)], 0, batch_size);
      runs[static_cast<std::size_t>(s)]->watermark(step.watermark);
    }
  }
  Expected got;
  for (auto& run : runs) {
    run->finish();
    got.out.insert(got.out.end(), run->out.begin(), run->out.end());
    got.late.insert(got.late.end(), run->late.begin(), run->late.end());
  }
  return got;
}

} // namespace

TEST_CASE("windows match a direct computation, at any batch size and parallelism",
          "[operators][window]") {
  struct Case {
    std::string window;
    std::int64_t size, slide, gap, lateness;
  };
  const std::vector<Case> cases = {
      {"{ kind = \"tumbling\", size = \"1s\" }", 1000, 1000, 0, 0},
      {"{ kind = \"tumbling\", size = \"1s\" }", 1000, 1000, 0, 800},
      {"{ kind = \"tumbling\", size = \"500ms\" }", 500, 500, 0,
       1000}, // a window's end + lateness is another's end
      {"{ kind = \"sliding\", size = \"1s\", slide = \"300ms\" }", 1000, 300, 0, 0},
      {"{ kind = \"sliding\", size = \"1s\", slide = \"250ms\" }", 1000, 250, 0, 500},
      {"{ kind = \"session\", gap = \"400ms\" }", 0, 0, 400, 0},
      {"{ kind = \"session\", gap = \"300ms\" }", 0, 0, 300, 600},
  };
  std::uint32_t seed = 1;
  for (const auto& c : cases) {
    INFO(c.window << " allowed_lateness " << c.lateness);
    const auto steps = random_steps(seed++);
    Expected expected = c.gap > 0 ? reference_sessions(steps, c.gap, c.lateness)
                                  : reference_aligned(steps, c.size, c.slide, c.lateness);
    REQUIRE(expected.out.size() > 100);
    REQUIRE(!expected.late.empty());
    Harness h(window_node(
        c.window,
        "allowed_lateness = \"" + std::to_string(c.lateness) + "ms\"\nlate_output = \"late\"",
        "{ n = \"count()\", c = \"count(v)\", s = \"sum(v)\", mx = \"max(v)\" }"));
    for (std::size_t batch_size : {std::size_t{1}, std::size_t{7}, std::size_t{1024}}) {
      for (int parallelism : {1, 3}) {
        INFO("batch size " << batch_size << ", parallelism " << parallelism);
        Expected got = run_split(h, steps, batch_size, parallelism);
        CHECK(sorted(got.out) == sorted(expected.out));
        CHECK(sorted(got.late) == sorted(expected.late));
      }
    }
    CHECK(h.errors.errors.empty());
  }
}

TEST_CASE("a window keyed by an expression groups by its value", "[operators][window][key]") {
  Harness h(single_operator_pipeline("type = \"window\"\nkey = [\"k % 2\"]\nwindow = { kind = \"tumbling\", size = \"1s\" }"
                                     "\naggregates = { n = \"count()\" }\n"));
  OperatorRun run(h, "op");
  run.records({R"j({"ts":1,"k":1})j", R"j({"ts":2,"k":3})j", R"j({"ts":3,"k":4})j", R"j({"ts":4,"k":"x"})j"});
  run.finish();
  CHECK(sorted(run.out) == sorted({R"j({"k % 2":1,"window_start":0,"window_end":1000,"n":2})j",
                                   R"j({"k % 2":0,"window_start":0,"window_end":1000,"n":1})j"}));
  REQUIRE(h.errors.errors.size() == 1); // "x" % 2
}

// --- memory: cell sizes and firing in chunks -------------------------------------------------

// Tumbling windows keep each block in the smallest cell that holds it (8, 16 or 32 bytes, or a
// pointer to a heap block): every size must count the same.
TEST_CASE("every size of aggregates block counts the same", "[operators][window][memory]") {
  Lines input;
  std::map<std::pair<int, std::int64_t>, std::int64_t> expected; // (key, start) -> count
  std::mt19937 rng(7);
  for (int i = 0; i < 3000; ++i) {
    const int k = static_cast<int>(rng() % 300);
    const std::int64_t ts = static_cast<std::int64_t>(rng() % 5000);
    input.push_back("{\"ts\":" + std::to_string(ts) + ",\"k\":" + std::to_string(k) + ",\"v\":1}");
    ++expected[{k, ts / 1000 * 1000}];
  }
  for (const char* aggregates :
       {"{ n = \"count()\" }", "{ n = \"count()\", c = \"count(v)\" }",
        "{ n = \"count()\", s = \"sum(v)\" }",
        "{ n = \"count()\", c = \"count(v)\", s = \"sum(v)\", mx = \"max(v)\" }"}) {
    INFO(aggregates);
    Harness h(window_node("{ kind = \"tumbling\", size = \"1s\" }", "", aggregates));
    OperatorRun run(h, "op");
    run.records(input, 0, 100);
    run.watermark(2000);
    run.finish();
    REQUIRE(run.out.size() == expected.size());
    std::map<std::pair<int, std::int64_t>, std::int64_t> got;
    for (const auto& line : run.out) {
      auto field = [&](const std::string& name) {
        const auto at = line.find("\"" + name + "\":") + name.size() + 3;
        return std::stoll(line.substr(at));
      };
      got[{static_cast<int>(field("k")), field("window_start")}] = field("n");
    }
    CHECK(got == expected);
  }
}

// The end of input fires every window at once; with pass_on_fired (as the task chain sets it)
// the rows go downstream in chunks, so that no batch holds them all. A 10 M-key count held
// every row in one batch at the end, about as many bytes again as its state.
TEST_CASE("firing many windows hands the rows on in bounded chunks", "[operators][window][memory]") {
  for (const char* window :
       {"{ kind = \"tumbling\", size = \"1h\" }", "{ kind = \"session\", gap = \"1h\" }"}) {
    INFO(window);
    Harness h(window_node(window));
    auto op = h.registry().make_operator(h.job().spec, h.node("op"), h.names());
    auto ctx = h.context("op", 0, 1);
    std::vector<std::size_t> chunks;
    std::vector<std::string> out;
    ctx.pass_on_fired = [&](streamctl::state::Batch& fired) {
      chunks.push_back(fired.size());
      h.append(fired, out);
      fired.clear();
    };
    op->open(ctx);
    Lines input;
    for (int k = 0; k < 10000; ++k)
      input.push_back("{\"ts\":" + std::to_string(k) + ",\"k\":" + std::to_string(k) + ",\"v\":1}");
    for (std::size_t at = 0; at < input.size(); at += 1000) {
      streamctl::state::Batch in = h.parse(input, at, at + 1000, "ts");
      streamctl::state::Batch result;
      op->process(in, result);
      CHECK(result.empty());
    }
    CHECK(chunks.empty()); // nothing fires before the watermark
    streamctl::state::Batch rest;
    op->on_watermark(INT64_MAX, rest);
    op->finish(rest);
    REQUIRE(!chunks.empty());
    for (std::size_t n : chunks) CHECK(n <= 4096);
    CHECK(rest.size() < 4096);
    h.append(rest, out);
    CHECK(out.size() == 10000);
    CHECK(std::set<std::string>(out.begin(), out.end()).size() == 10000);
  }
}
