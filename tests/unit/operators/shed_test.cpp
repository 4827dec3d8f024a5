#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <vector>

#include "harness.hpp"

using streamctl::testing::Harness;
using streamctl::testing::OperatorRun;
namespace state = streamctl::state;

namespace {

std::string shed_pipeline(const std::string& settings) {
  return "name = \"t\"\n[sources.in]\ntype = \"stdin\"\nevent_time = \"ts\"\n"
         "[operators.op]\ntype = \"shed\"\ninputs = [\"in\"]\n" +
         settings + "\n[sinks.out]\ntype = \"stdout\"\ninputs = [\"op\"]\n";
}

std::vector<std::string> numbered(int from, int count, std::int64_t ts = 0) {
  std::vector<std::string> lines;
  for (int k = from; k < from + count; ++k)
    lines.push_back(R"({"n":)" + std::to_string(k) + R"(,"ts":)" + std::to_string(ts) + "}");
  return lines;
}

// What one subtask keeps of `lines`, fed in batches of `batch`.
std::vector<std::string> kept(Harness& h, const std::vector<std::string>& lines,
                              std::size_t batch = 1024, int subtask = 0) {
  OperatorRun run(h, "op", subtask, 2);
  run.records(lines, 0, batch);
  run.finish();
  return run.out;
}

} // namespace

TEST_CASE("shed drops about its drop_probability, the same records for the same seed",
          "[operators][shed]") {
  Harness h(shed_pipeline("drop_probability = 0.3\nseed = 11"));
  const auto lines = numbered(0, 20000);
  const auto a = kept(h, lines);
  // 6,000 expected dropped; the standard deviation is about 65.
  CHECK(a.size() > 13600);
  CHECK(a.size() < 14400);
  // The same seed and subtask drop the same records, whatever the batching.
  CHECK(kept(h, lines, 7) == a);
  // Kept records are input records, once each, in order.
  std::set<std::string> seen(lines.begin(), lines.end());
  std::set<std::string> once;
  for (const auto& line : a) {
    CHECK(seen.count(line) == 1);
    CHECK(once.insert(line).second);
  }
  // Another seed, or another subtask, drops other records.
  Harness other(shed_pipeline("drop_probability = 0.3\nseed = 12"));
  CHECK(kept(other, lines) != a);
  CHECK(kept(h, lines, 1024, 1) != a);
}

TEST_CASE("shed with drop_probability 0 keeps every record and 1 drops every one",
          "[operators][shed]") {
  const auto lines = numbered(0, 3000);
  Harness none(shed_pipeline("drop_probability = 0.0"));
  CHECK(kept(none, lines) == lines);
  Harness all(shed_pipeline("drop_probability = 1.0"));
  CHECK(kept(all, lines).empty());
}

TEST_CASE("shed with target_latency drops only while the watermark lags behind it",
          "[operators][shed]") {
  Harness h(shed_pipeline("target_latency = \"200ms\""));
  OperatorRun run(h, "op");
  // No watermark yet: no lag known, nothing dropped.
  run.set_clock(10'000);
  run.records(numbered(0, 5, 9'000));
  CHECK(run.out.size() == 5);
  // The watermark 100 ms behind the clock: within the target.
  run.watermark(9'900);
  run.records(numbered(5, 5, 9'950));
  CHECK(run.out.size() == 10);
  // The clock runs on and the watermark stays: 500 ms behind, so every record is dropped
  // (drop_probability defaults to 1 with target_latency).
  run.set_clock(10'400);
  run.records(numbered(10, 5, 9'950));
  CHECK(run.out.size() == 10);
  // The watermark catches up: records pass again.
  run.watermark(10'350);
  run.records(numbered(15, 5, 10'380));
  CHECK(run.out.size() == 15);
  // The end of input (+infinity) is not a sign of keeping up.
  run.set_clock(20'000);
  run.finish();
  run.records(numbered(20, 5, 10'380));
  CHECK(run.out.size() == 15);
}

TEST_CASE("shed goes on from its checkpointed position after a restore", "[operators][shed]") {
  Harness h(shed_pipeline("drop_probability = 0.5\nseed = 3"));
  const auto lines = numbered(0, 4000);
  const auto whole = kept(h, lines);

  // The first 1500 records, a snapshot, then a new operator restored from it reads the rest.
  auto make = [&](int subtask, int parallelism) {
    auto ctx = h.context("op", subtask, parallelism);
    auto op = h.registry().make_operator(h.job().spec, h.node("op"), h.names());
    op->open(ctx);
    return std::make_pair(std::move(op), ctx);
  };
  std::vector<std::string> out;
  auto [first, ctx1] = make(0, 2);
  state::Batch result;
  first->process(h.parse(lines, 0, 1500, "ts"), result);
  h.append(result, out);
  std::string saved;
  first->snapshot_subtask_state(saved);
  REQUIRE_FALSE(saved.empty());

  auto [second, ctx2] = make(0, 2);
  REQUIRE(second->restore_subtask_state({saved, std::string_view()}));
  state::Batch rest;
  second->process(h.parse(lines, 1500, lines.size(), "ts"), rest);
  h.append(rest, out);
  CHECK(out == whole);

  // Damaged state is refused, not misread.
  auto [third, ctx3] = make(0, 2);
  CHECK_FALSE(third->restore_subtask_state({saved.substr(0, 9), std::string_view()}));
}

TEST_CASE("shed settings are checked", "[operators][shed]") {
  auto problems = [](const std::string& settings, bool event_time = true) {
    std::string text = shed_pipeline(settings);
    if (!event_time) text.replace(text.find("event_time = \"ts\"\n"), 18, "");
    try {
      Harness h(text);
      OperatorRun run(h, "op");
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK_THAT(problems("drop_probability = 1.5"), Catch::Contains("must be a number in [0, 1]"));
  CHECK_THAT(problems(""), Catch::Contains("needs 'drop_probability'"));
  CHECK_THAT(problems("target_latency = \"1s\"", false),
             Catch::Contains("no source upstream sets 'event_time'"));
  CHECK(problems("target_latency = \"1s\"").empty());
  CHECK(problems("drop_probability = 0.25\nseed = 4").empty());
}
