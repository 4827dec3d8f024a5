#include <catch2/catch.hpp>

#include "harness.hpp"
#include "operators/event_time.hpp"

using namespace streamctl;

namespace {
std::string source_with(const std::string& keys) {
  return "name = \"t\"\n[sources.in]\ntype = \"stdin\"\n" + keys + "\n[sinks.out]\ntype = \"stdout\"\ninputs = [\"in\"]\n";
}

state::Batch parse(testing::Harness& h, const std::vector<std::string>& lines) {
  state::Batch batch;
  state::RecordBuilder b;
  for (const auto& line : lines) {
    b.reset();
    REQUIRE(state::parse_json_record(batch.copy_string(line), h.names(), batch, b).ok());
    b.finish(batch);
  }
  return batch;
}

operators::OperatorContext context(testing::Harness& h) {
  operators::OperatorContext ctx;
  ctx.node = &h.node("in");
  ctx.names = &h.names();
  ctx.errors = &h.errors;
  return ctx;
}
} // namespace

TEST_CASE("the assigner stamps epoch ms and RFC 3339 times; the watermark lags by max_delay",
          "[operators][event_time]") {
  testing::Harness h(source_with("event_time = \"ts\"\nwatermark = { max_delay = \"2s\" }"));
  auto assigner = operators::TimestampAssigner::from_node(h.node("in"), h.names());
  REQUIRE(assigner);
  CHECK(assigner->watermark() == operators::kWatermarkMin);
  auto in = parse(h, {R"({"ts": 10000})", R"({"ts": "1970-01-01T00:00:30.500Z"})", R"({"ts": 20000})"});
  state::Batch out;
  auto ctx = context(h);
  assigner->assign(in, out, ctx);
  REQUIRE(out.size() == 3);
  CHECK(out[0].timestamp == 10000);
  CHECK(out[1].timestamp == 30500);
  CHECK(out[2].timestamp == 20000);
  CHECK(assigner->watermark() == 28500); // largest so far minus max_delay, exactly

  // Out-of-order records never move the watermark back.
  state::Batch later;
  auto older = parse(h, {R"({"ts": 1000})"});
  assigner->assign(older, later, ctx);
  CHECK(assigner->watermark() == 28500);
}

TEST_CASE("a record without a usable event time goes to on_error", "[operators][event_time]") {
  testing::Harness h(source_with("event_time = \"ts\""));
  auto assigner = operators::TimestampAssigner::from_node(h.node("in"), h.names());
  auto in = parse(h, {R"({"x": 1})", R"({"ts": "yesterday"})", R"({"ts": true})", R"({"ts": 5})"});
  state::Batch out;
  auto ctx = context(h);
  assigner->assign(in, out, ctx);
  REQUIRE(out.size() == 1);
  CHECK(out[0].timestamp == 5);
  REQUIRE(h.errors.errors.size() == 3);
  CHECK_THAT(h.errors.errors[0].reason, Catch::Contains("no event time"));
  CHECK_THAT(h.errors.errors[1].reason, Catch::Contains("RFC 3339"));
}

TEST_CASE("event_time may be an expression; no event_time means no assigner", "[operators][event_time]") {
  testing::Harness h(source_with("event_time = \"seconds * 1000\""));
  auto assigner = operators::TimestampAssigner::from_node(h.node("in"), h.names());
  auto in = parse(h, {R"({"seconds": 7})"});
  state::Batch out;
  auto ctx = context(h);
  assigner->assign(in, out, ctx);
  CHECK(out[0].timestamp == 7000);

  testing::Harness plain(source_with(""));
  CHECK(operators::TimestampAssigner::from_node(plain.node("in"), plain.names()) == nullptr);
}

// The assigner evaluates its expression over a whole batch; a record whose expression fails
// (here: a string divided) or whose value is not a time stops eval_batch in the middle of a
// batch and must be reported exactly as record by record: same order, reasons and content,
// and the records around it stamped as before. 700 records span several of the program's
// chunks.
TEST_CASE("the assigner gives per batch what it gives record by record, failures included",
          "[operators][event_time]") {
  testing::Harness h(source_with("event_time = \"ts / 1000\"\nwatermark = { max_delay = \"1s\" }"));
  std::vector<std::string> lines;
  for (int k = 0; k < 700; ++k) {
    if (k % 97 == 5) lines.push_back(R"({"ts": "soon", "k": )" + std::to_string(k) + "}");
    else if (k % 131 == 7) lines.push_back(R"({"k": )" + std::to_string(k) + "}"); // null: no time
    else if (k % 149 == 0) lines.push_back(R"({"ts": true, "k": )" + std::to_string(k) + "}");
    else lines.push_back(R"({"ts": )" + std::to_string(1000000 + k * 7919 % 5000) + ", \"k\": " +
                         std::to_string(k) + "}");
  }
  lines.back() = R"({"ts": [1], "k": 699})"; // a failure at the very end of the batch
  auto ctx = context(h);

  auto batched = operators::TimestampAssigner::from_node(h.node("in"), h.names());
  auto in = parse(h, lines);
  state::Batch out;
  batched->assign(in, out, ctx);
  auto batch_errors = h.errors.errors;
  h.errors.errors.clear();

  auto single = operators::TimestampAssigner::from_node(h.node("in"), h.names());
  std::vector<std::int64_t> expected;
  for (const auto& line : lines) {
    auto one = parse(h, {line});
    state::Batch stamped;
    single->assign(one, stamped, ctx);
    for (const auto& r : stamped) expected.push_back(r.timestamp);
  }

  std::vector<std::int64_t> got;
  for (const auto& r : out) got.push_back(r.timestamp);
  CHECK(got == expected);
  CHECK(batched->watermark() == single->watermark());
  REQUIRE(batch_errors.size() == h.errors.errors.size());
  REQUIRE(batch_errors.size() > 10);
  for (std::size_t k = 0; k < batch_errors.size(); ++k) {
    CHECK(batch_errors[k].raw == h.errors.errors[k].raw);
    CHECK(batch_errors[k].reason == h.errors.errors[k].reason);
  }
  CHECK(batch_errors.back().raw == R"({"ts":[1],"k":699})");
}
