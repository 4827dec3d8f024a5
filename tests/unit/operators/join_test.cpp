#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "harness.hpp"
#include "operators/join.hpp"
#include "operators/partition_key.hpp"
#include "state/key_group.hpp"

using streamctl::operators::JoinStateSize;
using streamctl::testing::Harness;
using streamctl::testing::OperatorRun;

namespace {

// Two sources, `l` (input 0) and `r` (input 1), into the join `j`. The join's own lines start
// at line 9 of the file.
std::string join_pipeline(const std::string& body, const std::string& inputs = R"(["l", "r"])") {
  const std::string head = "name = \"t\"\n"     // 1
                           "[sources.l]\n"      // 2
                           "type = \"stdin\"\n" // 3
                           "[sources.r]\n"      // 4
                           "type = \"stdin\"\n" // 5
                           "[operators.j]\n"    // 6
                           "type = \"join\"\n"; // 7
  return head + "inputs = " + inputs + "\n" + body +
         "\n[sinks.out]\ntype = \"stdout\"\ninputs = [\"j\"]\n";
}

const std::string on_user = "on = { left = \"user\", right = \"uid\" }\n";

std::vector<std::string> sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

// Drives the join like OperatorRun, and also shows the event time of each output row and what
// the subtask holds.
class JoinRun {
public:
  explicit JoinRun(Harness& h, int subtask = 0, int parallelism = 1)
      : h_(h), ctx_(h.context("j", subtask, parallelism)) {
    op_ = h.registry().make_operator(h.job().spec, h.node("j"), h.names());
    ctx_.now_ms = [this] { return now_; };
    op_->open(ctx_);
  }
  void records(const std::vector<std::string>& lines, int input, std::size_t batch_size = 1024) {
    for (std::size_t at = 0; at < lines.size(); at += batch_size) {
      auto in = h_.parse(lines, at, std::min(lines.size(), at + batch_size), "ts");
      streamctl::state::Batch result;
      op_->process_input(input, in, result);
      collect(result);
    }
  }
  void watermark(std::int64_t w) {
    streamctl::state::Batch result;
    op_->on_watermark(w, result);
    collect(result);
  }
  void processing_time(std::int64_t now) {
    now_ = now;
    streamctl::state::Batch result;
    op_->on_processing_time(now, result);
    collect(result);
  }
  void set_clock(std::int64_t now) { now_ = now; }
  void finish() {
    watermark(INT64_MAX);
    streamctl::state::Batch result;
    op_->finish(result);
    collect(result);
  }
  JoinStateSize state() const { return *streamctl::operators::join_state_size(*op_); }

  std::vector<std::string> out;
  std::vector<std::int64_t> stamps; // event time of each row of `out`

private:
  void collect(const streamctl::state::Batch& result) {
    h_.append(result, out);
    for (const auto& r : result)
      stamps.push_back(r.timestamp);
  }

  Harness& h_;
  streamctl::operators::OperatorContext ctx_;
  std::unique_ptr<streamctl::operators::Operator> op_;
  std::int64_t now_ = 0;
};

bool empty_state(const JoinStateSize& s) {
  return s.entries == 0 && s.records == 0 && s.timers == 0;
}

} // namespace

// ---- window join ----

TEST_CASE("a tumbling window join emits the cross product of each key's window", "[join]") {
  Harness h(join_pipeline(on_user + "window = { kind = \"tumbling\", size = \"10s\" }"));
  JoinRun run(h);
  run.records({R"({"user":"a","ts":1000,"l":1})", R"({"user":"a","ts":2000,"l":2})",
               R"({"user":"b","ts":3000,"l":3})"},
              0);
  run.records({R"({"uid":"a","ts":1500,"r":1})", R"({"uid":"a","ts":9999,"r":2})",
               R"({"uid":"a","ts":10000,"r":3})", R"({"uid":"c","ts":4000,"r":4})"},
              1);
  run.watermark(9999);
  CHECK(run.out.empty());
  run.watermark(10000);
  CHECK(sorted(run.out) == sorted({
                               R"({"user":"a","ts":1000,"l":1,"uid":"a","r":1})",
                               R"({"user":"a","ts":1000,"l":1,"uid":"a","r":2})",
                               R"({"user":"a","ts":2000,"l":2,"uid":"a","r":1})",
                               R"({"user":"a","ts":2000,"l":2,"uid":"a","r":2})",
                           }));
  CHECK(run.stamps == std::vector<std::int64_t>(4, 9999));
  // Keys b and c never meet; the right record at 10000 has no left in its window.
  run.finish();
  CHECK(run.out.size() == 4);
  CHECK(h.errors.errors.empty());
  CHECK(empty_state(run.state()));
}

TEST_CASE("a sliding window join joins a pair once in every window they share", "[join]") {
  Harness h(
      join_pipeline(on_user + "window = { kind = \"sliding\", size = \"10s\", slide = \"5s\" }"));
  JoinRun run(h);
  run.records({R"({"user":"a","ts":7000})"}, 0);
  run.records({R"({"uid":"a","ts":8000,"n":1})", R"({"uid":"a","ts":12000,"n":2})",
               R"({"uid":"a","ts":16000,"n":3})"},
              1);
  run.watermark(10000);
  REQUIRE(run.out == std::vector<std::string>{R"({"user":"a","ts":7000,"uid":"a","n":1})"});
  CHECK(run.stamps == std::vector<std::int64_t>{9999});
  run.watermark(15000); // [5000, 15000) holds the left at 7000 and the rights at 8000, 12000
  CHECK(sorted(run.out) == sorted({R"({"user":"a","ts":7000,"uid":"a","n":1})",
                                   R"({"user":"a","ts":7000,"uid":"a","n":1})",
                                   R"({"user":"a","ts":7000,"uid":"a","n":2})"}));
  CHECK(run.stamps == std::vector<std::int64_t>{9999, 14999, 14999});
  run.finish();
  CHECK(run.out.size() == 3);
  CHECK(empty_state(run.state()));
}

TEST_CASE("a window join takes records out of order while the watermark allows", "[join]") {
  Harness h(join_pipeline(on_user + "window = { kind = \"tumbling\", size = \"10s\" }"));
  JoinRun run(h);
  run.watermark(500);
  run.records({R"({"user":"a","ts":5000})", R"({"user":"a","ts":1000})"}, 0);
  run.records({R"({"uid":"a","ts":3000})", R"({"uid":"a","ts":600})"}, 1);
  run.watermark(10000);
  CHECK(run.out.size() == 4);
  CHECK(h.errors.errors.empty());
}

TEST_CASE("a window join reports a record late for all its windows and joins it nowhere",
          "[join]") {
  Harness h(
      join_pipeline(on_user + "window = { kind = \"sliding\", size = \"10s\", slide = \"5s\" }"));
  JoinRun run(h);
  run.records({R"({"user":"a","ts":11000})"}, 0);
  run.watermark(10000);
  // 9000 is in [0, 10000), closed, and [5000, 15000), open: joined there, not reported.
  run.records({R"({"uid":"a","ts":9000,"n":1})"}, 1);
  CHECK(h.errors.errors.empty());
  // 4000 is in [0, 10000) and [-5000, 5000), both closed.
  run.records({R"({"uid":"a","ts":4000,"n":2})"}, 1);
  REQUIRE(h.errors.errors.size() == 1);
  CHECK_THAT(h.errors.errors[0].reason, Catch::Contains("late record"));
  CHECK_THAT(h.errors.errors[0].raw, Catch::Contains(R"("n":2)"));
  run.finish();
  CHECK(run.out == std::vector<std::string>{R"({"user":"a","ts":11000,"uid":"a","n":1})"});
  CHECK(run.stamps == std::vector<std::int64_t>{14999});
}

TEST_CASE("a processing-time window join fires by the clock", "[join]") {
  Harness h(join_pipeline(on_user + "window = { kind = \"tumbling\", size = \"10s\" }"));
  OperatorRun run(h, "j");
  run.set_clock(1000);
  run.records({R"({"user":"a","x":1})"}, 0);
  run.set_clock(4000);
  run.records({R"({"uid":"a","y":2})", R"({"uid":"b","y":3})"}, 1);
  run.processing_time(9999);
  CHECK(run.out.empty());
  run.processing_time(10000);
  CHECK(run.out == std::vector<std::string>{R"({"user":"a","x":1,"uid":"a","y":2})"});
  // A record of the next window waits for it, or for the end of input.
  run.set_clock(12000);
  run.records({R"({"user":"b","x":4})"}, 0);
  run.records({R"({"uid":"b","y":5})"}, 1);
  run.processing_time(19999);
  CHECK(run.out.size() == 1);
  run.finish();
  REQUIRE(run.out.size() == 2);
  CHECK(run.out[1] == R"({"user":"b","x":4,"uid":"b","y":5})");
}

TEST_CASE("a join with one silent side emits nothing and keeps nothing at the end", "[join]") {
  auto body =
      GENERATE(std::string("window = { kind = \"tumbling\", size = \"10s\" }"),
               std::string("window = { kind = \"sliding\", size = \"10s\", slide = \"2s\" }"),
               std::string("interval = { lower = \"-5s\", upper = \"5s\" }"));
  Harness h(join_pipeline(on_user + body));
  JoinRun run(h);
  run.records({R"({"user":"a","ts":1000})", R"({"user":"b","ts":30000})", R"({"user":"c"})"}, 0);
  CHECK(run.state().records > 0);
  run.finish();
  CHECK(run.out.empty());
  CHECK(empty_state(run.state()));
}

// ---- interval join ----

TEST_CASE("an interval join includes both bounds, with negative and positive offsets", "[join]") {
  Harness h(join_pipeline(on_user + "interval = { lower = \"-2s\", upper = \"1s\" }"));
  JoinRun run(h);
  run.records({R"({"user":"a","ts":10000})"}, 0);
  run.records({R"({"uid":"a","ts":7999,"n":1})", R"({"uid":"a","ts":8000,"n":2})",
               R"({"uid":"a","ts":10000,"n":3})", R"({"uid":"a","ts":11000,"n":4})",
               R"({"uid":"a","ts":11001,"n":5})", R"({"uid":"b","ts":10000,"n":6})"},
              1);
  // Emitted on arrival of the second record of each pair, before any watermark.
  CHECK(run.out == std::vector<std::string>{R"({"user":"a","ts":10000,"uid":"a","n":2})",
                                            R"({"user":"a","ts":10000,"uid":"a","n":3})",
                                            R"({"user":"a","ts":10000,"uid":"a","n":4})"});
  CHECK(run.stamps == std::vector<std::int64_t>{10000, 10000, 11000});
  // The other way round: the right records are stored, the left arrives second.
  run.records({R"({"user":"a","ts":9001,"m":1})"}, 0); // matches tr in [7001, 10001]
  CHECK(run.out.size() == 6);
  CHECK(std::vector<std::string>(run.out.begin() + 3, run.out.end()) ==
        std::vector<std::string>{R"({"user":"a","ts":9001,"m":1,"uid":"a","n":1})",
                                 R"({"user":"a","ts":9001,"m":1,"uid":"a","n":2})",
                                 R"({"user":"a","ts":9001,"m":1,"uid":"a","n":3})"});
  CHECK(std::vector<std::int64_t>(run.stamps.begin() + 3, run.stamps.end()) ==
        std::vector<std::int64_t>{9001, 9001, 10000});
  run.finish();
  CHECK(run.out.size() == 6);
  CHECK(empty_state(run.state()));
}

TEST_CASE("an interval join with both bounds positive joins only later right records", "[join]") {
  Harness h(join_pipeline(on_user + "interval = { lower = \"1s\", upper = \"3s\" }"));
  JoinRun run(h);
  run.records({R"({"uid":"a","ts":500,"n":0})", R"({"uid":"a","ts":1999,"n":1})"}, 1);
  run.records({R"({"user":"a","ts":1000})"}, 0);
  run.records({R"({"uid":"a","ts":1000,"n":2})", R"({"uid":"a","ts":2000,"n":3})",
               R"({"uid":"a","ts":4000,"n":4})", R"({"uid":"a","ts":4001,"n":5})"},
              1);
  CHECK(run.out == std::vector<std::string>{R"({"user":"a","ts":1000,"uid":"a","n":3})",
                                            R"({"user":"a","ts":1000,"uid":"a","n":4})"});
  CHECK(run.stamps == std::vector<std::int64_t>{2000, 4000});
}

TEST_CASE("an interval join drops expired records and never joins them later", "[join]") {
  Harness h(join_pipeline(on_user + "interval = { lower = \"-1s\", upper = \"1s\" }"));
  JoinRun run(h);
  run.records({R"({"user":"a","ts":1000})"}, 0);
  run.records({R"({"uid":"a","ts":5000})"}, 1);
  run.watermark(1999);
  CHECK(run.state().records == 2); // the left can still meet a right at 2000
  run.watermark(2000);             // ... and now cannot
  CHECK(run.state().records == 1);
  CHECK(run.state().timers == 1);
  // A right record that would have matched it is at or below the watermark: late.
  run.records({R"({"uid":"a","ts":2000})"}, 1);
  REQUIRE(h.errors.errors.size() == 1);
  CHECK_THAT(h.errors.errors[0].reason, Catch::Contains("late record"));
  run.records({R"({"uid":"a","ts":2001})"}, 1);
  CHECK(run.out.empty());
  run.watermark(5999); // the right at 2001 is gone; the one at 5000 waits for a left up to 6000
  CHECK(run.state().records == 1);
  run.watermark(6000);
  CHECK(empty_state(run.state()));
  // A left late by the watermark is not joined even though a right in range was stored.
  run.records({R"({"uid":"a","ts":6500})"}, 1);
  run.records({R"({"user":"a","ts":6000})"}, 0);
  CHECK(run.out.empty());
  CHECK(h.errors.errors.size() == 2);
}

TEST_CASE("an interval join keeps an out-of-order record until its own expiry", "[join]") {
  Harness h(join_pipeline(on_user + "interval = { lower = \"0s\", upper = \"2s\" }"));
  JoinRun run(h);
  run.records({R"({"user":"a","ts":5000,"n":1})", R"({"user":"a","ts":1000,"n":2})",
               R"({"user":"a","ts":3000,"n":3})"},
              0);
  run.watermark(3000); // the left at 1000 expires (1000 + 2s)
  CHECK(run.state().records == 2);
  run.records({R"({"uid":"a","ts":5000})"}, 1); // joins n=1 and n=3
  CHECK(sorted(run.out) == sorted({R"({"user":"a","ts":5000,"n":1,"uid":"a"})",
                                   R"({"user":"a","ts":3000,"n":3,"uid":"a"})"}));
  run.watermark(5000); // n=3 (until 3000 + 2s) and the right (until 5000 - 0s) go
  CHECK(run.state().records == 1);
  run.watermark(7000);
  CHECK(empty_state(run.state()));
}

TEST_CASE("a processing-time interval join expires by the clock", "[join]") {
  Harness h(join_pipeline(on_user + "interval = { lower = \"-1s\", upper = \"1s\" }"));
  JoinRun run(h);
  run.set_clock(1000);
  run.records({R"({"user":"a"})"}, 0);
  run.set_clock(2000);
  run.records({R"({"uid":"a","n":1})"}, 1); // tr == tl + upper: joins
  run.processing_time(2001);                // the left at 1000 is gone
  run.records({R"({"uid":"a","n":2})"}, 1);
  CHECK(run.out == std::vector<std::string>{R"({"user":"a","uid":"a","n":1})"});
  CHECK(run.stamps == std::vector<std::int64_t>{streamctl::state::kNoTimestamp});
  run.finish();
  CHECK(empty_state(run.state()));
}

// ---- output, keys ----

TEST_CASE("the default output is the left's fields, then the right's the left lacks", "[join]") {
  Harness h(join_pipeline(on_user + "window = { kind = \"tumbling\", size = \"10s\" }"));
  OperatorRun run(h, "j");
  run.records({R"({"v":1,"user":"a","ts":5,"geo":{"city":"x"}})"}, 0);
  run.records({R"({"w":[1,2],"ts":7,"v":2,"uid":"a","geo":null,"z":"s"})"}, 1);
  run.finish();
  CHECK(run.out ==
        std::vector<std::string>{
            R"({"v":1,"user":"a","ts":5,"geo":{"city":"x"},"w":[1,2],"uid":"a","z":"s"})"});
}

TEST_CASE("select builds rows from left. and right. fields in file order", "[join]") {
  Harness h(join_pipeline(on_user + "window = { kind = \"tumbling\", size = \"10s\" }\n" +
                          "select = { z = \"left.user\", a = \"right.price * 2\", "
                          "city = \"upper(left.geo.city)\", r = \"right\" }"));
  OperatorRun run(h, "j");
  run.records({R"({"user":"a","ts":5,"geo":{"city":"x"}})"}, 0);
  run.records({R"({"uid":"a","ts":7,"price":4})"}, 1);
  run.finish();
  CHECK(run.out ==
        std::vector<std::string>{R"({"z":"a","a":8,"city":"X","r":{"uid":"a","ts":7,"price":4}})"});
}

TEST_CASE("a select expression that fails on a pair makes that pair a bad record", "[join]") {
  Harness h(join_pipeline(on_user + "interval = { lower = \"-1s\", upper = \"1s\" }\n" +
                          "select = { u = \"left.user\", total = \"left.v + right.v\" }"));
  OperatorRun run(h, "j");
  run.records({R"({"user":"a","ts":5,"v":1})"}, 0);
  run.records({R"({"uid":"a","ts":6,"v":"ten"})", R"({"uid":"a","ts":7,"v":2})"}, 1);
  CHECK(run.out == std::vector<std::string>{R"({"u":"a","total":3})"});
  REQUIRE(h.errors.errors.size() == 1);
  CHECK_THAT(h.errors.errors[0].reason, Catch::Contains("select.total"));
  CHECK_THAT(h.errors.errors[0].raw, Catch::Contains(R"("left":{"user":"a")"));
  CHECK_THAT(h.errors.errors[0].raw, Catch::Contains(R"("right":{"uid":"a","ts":6,"v":"ten"})"));
}

TEST_CASE("a null or missing join key matches nothing; a failing key is a bad record", "[join]") {
  Harness h(join_pipeline("on = { left = \"lower(user)\", right = \"uid\" }\n"
                          "window = { kind = \"tumbling\", size = \"10s\" }"));
  JoinRun run(h);
  run.records(
      {R"({"user":null,"ts":1})", R"({"ts":2})", R"({"user":5,"ts":3})", R"({"user":"A","ts":4})"},
      0);
  run.records({R"({"uid":null,"ts":1})", R"({"ts":2})", R"({"uid":"a","ts":3})"}, 1);
  run.finish();
  CHECK(run.out == std::vector<std::string>{R"({"user":"A","ts":4,"uid":"a"})"});
  REQUIRE(h.errors.errors.size() == 1);
  CHECK_THAT(h.errors.errors[0].reason, Catch::Contains("on.left"));
  CHECK_THAT(h.errors.errors[0].raw, Catch::Contains(R"("user":5)"));
  CHECK(empty_state(run.state()));
}

// ---- the randomized reference ----

namespace {

struct Rec {
  int side; // 0 left, 1 right
  int id;
  int key; // -1: no key field
  std::int64_t ts;
  std::string json;
};

// Records of both sides, in an arrival order at most `disorder` ms behind the latest event
// time seen, so that with watermark = latest - disorder - 1 none is late.
std::vector<Rec> random_input(std::mt19937_64& rng, int n, std::int64_t span,
                              std::int64_t disorder) {
  std::vector<Rec> recs;
  for (int k = 0; k < n; ++k) {
    Rec r;
    r.side = static_cast<int>(rng() % 2);
    r.id = k;
    r.key = static_cast<int>(rng() % 7) - 1;
    // Multiples of 50 ms, so that equal times and exact bounds happen often.
    r.ts = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(span / 50)) * 50;
    std::string key =
        r.key < 0 ? "" : (r.side == 0 ? "\"k\":" : "\"key\":") + std::to_string(r.key) + ",";
    r.json =
        r.side == 0
            ? "{\"id\":" + std::to_string(k) + "," + key + "\"ts\":" + std::to_string(r.ts) + "}"
            : "{" + key + "\"rid\":" + std::to_string(k) + ",\"ts\":" + std::to_string(r.ts) + "}";
    recs.push_back(r);
  }
  std::sort(recs.begin(), recs.end(), [](const Rec& a, const Rec& b) { return a.ts < b.ts; });
  // Bounded disorder: each record may move back behind later ones by less than `disorder` ms.
  std::vector<std::pair<std::int64_t, Rec>> keyed;
  for (auto& r : recs)
    keyed.emplace_back(
        r.ts + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(disorder)), r);
  std::stable_sort(keyed.begin(), keyed.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  recs.clear();
  for (auto& [_, r] : keyed)
    recs.push_back(r);
  return recs;
}

// The default output row: the left's fields, then the right's but its "ts" (which the left
// has too, and wins), which is the right's last field.
std::string pair_row(const Rec& l, const Rec& r) {
  std::string row = l.json;
  row.pop_back();
  return row + "," + r.json.substr(1, r.json.find(",\"ts\"") - 1) + "}";
}

std::vector<std::string> expected_window_join(const std::vector<Rec>& recs, std::int64_t size,
                                              std::int64_t slide) {
  std::vector<std::string> rows;
  for (const auto& l : recs)
    for (const auto& r : recs) {
      if (l.side != 0 || r.side != 1 || l.key < 0 || l.key != r.key) continue;
      for (std::int64_t s = l.ts / slide * slide; s > l.ts - size; s -= slide)
        if (r.ts >= s && r.ts < s + size) rows.push_back(pair_row(l, r));
    }
  return sorted(rows);
}

std::vector<std::string> expected_interval_join(const std::vector<Rec>& recs, std::int64_t lower,
                                                std::int64_t upper) {
  std::vector<std::string> rows;
  for (const auto& l : recs)
    for (const auto& r : recs)
      if (l.side == 0 && r.side == 1 && l.key >= 0 && l.key == r.key && l.ts + lower <= r.ts &&
          r.ts <= l.ts + upper)
        rows.push_back(pair_row(l, r));
  return sorted(rows);
}

// Runs the records through `parallelism` subtasks, each getting the records whose key group
// it owns (by the join's own key encoding) or, with `broadcast`, a round-robin share of the
// left records and every right record. Consecutive records of one side go in batches of up to
// `batch_size`; after each batch every subtask gets the same watermark.
std::vector<std::string> run_split(Harness& h, const std::vector<Rec>& recs, int parallelism,
                                   std::size_t batch_size, std::int64_t disorder, bool broadcast) {
  const auto& spec = h.job().spec;
  const auto& node = h.node("j");
  auto max_p = static_cast<std::uint32_t>(spec.max_parallelism);
  std::optional<streamctl::operators::PartitionKey> keys[2] = {
      streamctl::operators::PartitionKey::for_input(spec, node, 0, h.names()),
      streamctl::operators::PartitionKey::for_input(spec, node, 1, h.names())};
  std::vector<std::unique_ptr<JoinRun>> runs;
  for (int s = 0; s < parallelism; ++s)
    runs.push_back(std::make_unique<JoinRun>(h, s, parallelism));

  std::int64_t latest = INT64_MIN;
  int round_robin = 0;
  std::string key_bytes;
  for (std::size_t at = 0; at < recs.size();) {
    const int side = recs[at].side;
    std::vector<std::vector<std::string>> lines(static_cast<std::size_t>(parallelism));
    std::size_t end = at;
    while (end < recs.size() && recs[end].side == side && end - at < batch_size) {
      const Rec& r = recs[end];
      latest = std::max(latest, r.ts);
      if (broadcast) {
        if (side == 1)
          for (auto& l : lines)
            l.push_back(r.json);
        else
          lines[static_cast<std::size_t>(round_robin++ % parallelism)].push_back(r.json);
      } else {
        auto batch = h.parse({r.json}, 0, 1);
        keys[side]->encode(batch[0], h.names(), key_bytes);
        auto group =
            streamctl::state::key_group_of(streamctl::state::hash_key_bytes(key_bytes), max_p);
        lines[static_cast<std::size_t>(
                  streamctl::state::subtask_for_key_group(group, parallelism, max_p))]
            .push_back(r.json);
      }
      ++end;
    }
    for (int s = 0; s < parallelism; ++s) {
      runs[static_cast<std::size_t>(s)]->records(lines[static_cast<std::size_t>(s)], side,
                                                 batch_size);
      runs[static_cast<std::size_t>(s)]->watermark(latest - disorder - 1);
    }
    at = end;
  }
  std::vector<std::string> out;
  for (auto& run : runs) {
    run->finish();
    CHECK(empty_state(run->state()));
    out.insert(out.end(), run->out.begin(), run->out.end());
  }
  return sorted(out);
}

} // namespace

TEST_CASE("window joins match a nested-loop reference at any batch size and split", "[join]") {
  const std::uint64_t seed = GENERATE(1, 2, 3);
  const bool sliding = GENERATE(false, true);
  std::mt19937_64 rng(seed);
  const std::int64_t size = 1000, slide = sliding ? 250 : 1000, disorder = 300;
  auto recs = random_input(rng, 400, 20000, disorder);
  std::string window = sliding ? "window = { kind = \"sliding\", size = \"1s\", slide = \"250ms\" }"
                               : "window = { kind = \"tumbling\", size = \"1s\" }";
  Harness h(join_pipeline("on = { left = \"k\", right = \"key\" }\n" + window));
  auto expected = expected_window_join(recs, size, slide);
  REQUIRE(expected.size() > 50);
  for (std::size_t batch : {std::size_t{1}, std::size_t{7}, std::size_t{1024}})
    for (int parallelism : {1, 3}) {
      INFO("batch " << batch << ", parallelism " << parallelism);
      CHECK(run_split(h, recs, parallelism, batch, disorder, false) == expected);
    }
  CHECK(h.errors.errors.empty());
}

TEST_CASE("interval joins match a nested-loop reference at any batch size and split", "[join]") {
  const std::uint64_t seed = GENERATE(4, 5, 6);
  std::mt19937_64 rng(seed);
  auto bounds = GENERATE(std::pair<std::int64_t, std::int64_t>{-500, 200},
                         std::pair<std::int64_t, std::int64_t>{100, 700},
                         std::pair<std::int64_t, std::int64_t>{-300, -300});
  const std::int64_t disorder = 300;
  auto recs = random_input(rng, 400, 20000, disorder);
  Harness h(join_pipeline("on = { left = \"k\", right = \"key\" }\ninterval = { lower = \"" +
                          std::to_string(bounds.first) + "ms\", upper = \"" +
                          std::to_string(bounds.second) + "ms\" }"));
  auto expected = expected_interval_join(recs, bounds.first, bounds.second);
  REQUIRE(expected.size() > (bounds.first == bounds.second ? 5u : 20u));
  for (std::size_t batch : {std::size_t{1}, std::size_t{7}, std::size_t{1024}})
    for (int parallelism : {1, 3}) {
      INFO("batch " << batch << ", parallelism " << parallelism);
      CHECK(run_split(h, recs, parallelism, batch, disorder, false) == expected);
    }
  CHECK(h.errors.errors.empty());
}

TEST_CASE("a broadcast join over 3 subtasks gives the result of one", "[join]") {
  std::mt19937_64 rng(7);
  const std::int64_t disorder = 200;
  auto recs = random_input(rng, 300, 10000, disorder);
  auto body =
      GENERATE(std::string("window = { kind = \"sliding\", size = \"1s\", slide = \"500ms\" }"),
               std::string("interval = { lower = \"-400ms\", upper = \"400ms\" }"));
  Harness h(
      join_pipeline("on = { left = \"k\", right = \"key\" }\nstrategy = \"broadcast\"\n" + body));
  auto one = run_split(h, recs, 1, 16, disorder, true);
  REQUIRE(one.size() > 20);
  CHECK(run_split(h, recs, 3, 16, disorder, true) == one);
  auto expected = body.rfind("window", 0) == 0 ? expected_window_join(recs, 1000, 500)
                                               : expected_interval_join(recs, -400, 400);
  CHECK(one == expected);
}

// ---- configuration ----

TEST_CASE("join configuration errors name the file position", "[join]") {
  SECTION("one input") {
    CHECK_THROWS_WITH(Harness(join_pipeline(
                          on_user + "window = { kind = \"tumbling\", size = \"1s\" }", R"(["l"])")),
                      Catch::Contains("test.toml:8:10") && Catch::Contains("exactly two inputs"));
  }
  SECTION("both window and interval") {
    CHECK_THROWS_WITH(
        Harness(join_pipeline(on_user + "window = { kind = \"tumbling\", size = \"1s\" }\n" +
                              "interval = { lower = \"0s\", upper = \"1s\" }")),
        Catch::Contains("test.toml:11:") && Catch::Contains("not both"));
  }
  SECTION("neither window nor interval") {
    CHECK_THROWS_WITH(Harness(join_pipeline(on_user)), Catch::Contains("needs 'window'"));
  }
  SECTION("a bad signed duration") {
    CHECK_THROWS_WITH(
        Harness(join_pipeline(on_user + "interval = { lower = \"-5x\", upper = \"5s\" }")),
        Catch::Contains("test.toml:10:22") && Catch::Contains("bad duration '-5x'"));
  }
  SECTION("lower above upper") {
    CHECK_THROWS_WITH(
        Harness(join_pipeline(on_user + "interval = { lower = \"5s\", upper = \"-5s\" }")),
        Catch::Contains("test.toml:10:") && Catch::Contains("must not be greater"));
  }
  SECTION("missing on.right") {
    CHECK_THROWS_WITH(Harness(join_pipeline("on = { left = \"user\" }\n"
                                            "window = { kind = \"tumbling\", size = \"1s\" }")),
                      Catch::Contains("test.toml:9:") && Catch::Contains("needs 'right'"));
  }
  SECTION("a sliding window without a slide") {
    CHECK_THROWS_WITH(
        Harness(join_pipeline(on_user + "window = { kind = \"sliding\", size = \"1s\" }")),
        Catch::Contains("test.toml:10:") && Catch::Contains("window.slide"));
  }
  SECTION("a select expression that reads a bare field") {
    CHECK_THROWS_WITH(
        Harness(join_pipeline(on_user + "window = { kind = \"tumbling\", size = \"1s\" }\n" +
                              "select = { u = \"user\" }")),
        Catch::Contains("test.toml:11:") && Catch::Contains("left.user or right.user"));
  }
  SECTION("every problem at once") {
    CHECK_THROWS_WITH(
        Harness(join_pipeline(on_user + "interval = { lower = \"x\", upper = \"y\" }", R"(["l"])")),
        Catch::Contains("exactly two inputs") && Catch::Contains("'x'") && Catch::Contains("'y'"));
  }
}
