#include <catch2/catch.hpp>

#include "pipeline/runtime/record_tap.hpp"
#include "pipeline/runtime/tap_protocol.hpp"

using namespace streamctl;
using runtime::RecordTap;

namespace {

// `n` records {"seq": first..first+n-1}.
state::Batch counter(state::FieldNames& names, int first, int n) {
  state::Batch out;
  state::RecordBuilder b;
  for (int k = first; k < first + n; ++k) {
    b.reset();
    b.append(names.intern("seq"), state::Value::integer(k));
    b.finish(out);
  }
  return out;
}

transport::ControlMessage tap_message(const std::string& id, const std::string& node, const std::string& sample,
                                      const std::string& limit) {
  transport::ControlMessage m{"TAP", {}};
  m.set("tap", id).set("node", node).set("sample", sample).set("limit", limit);
  return m;
}

std::size_t line_count(const std::string& lines) { return static_cast<std::size_t>(std::count(lines.begin(), lines.end(), '\n')); }

} // namespace

TEST_CASE("a tap copies the records of its node only, as JSON lines", "[tap]") {
  state::FieldNames names;
  RecordTap tap({"gen", "dbl", "out"}, names);
  auto now = RecordTap::Clock::now();
  CHECK_FALSE(tap.active());
  tap.open(tap_message("t1", "dbl", "1", "0"), now);
  REQUIRE(tap.active());
  tap.offer(0, counter(names, 0, 3)); // the source's batch: not tapped
  tap.offer(1, counter(names, 10, 2));
  auto due = tap.take_due(now);
  REQUIRE(due.size() == 1);
  CHECK(due[0].type == "TAPPED");
  CHECK(due[0].get("tap") == "t1");
  CHECK(due[0].get("lines") == "{\"seq\":10}\n{\"seq\":11}\n");
  CHECK(due[0].get("skipped") == "0");
  // Nothing waits: nothing is sent, even when due.
  CHECK(tap.take_due(now + runtime::kTapFlushEvery, true).empty());
}

TEST_CASE("a tap opened for a node not in the chain is ignored", "[tap]") {
  state::FieldNames names;
  RecordTap tap({"gen", "dbl"}, names);
  tap.open(tap_message("t1", "other", "1", "0"), RecordTap::Clock::now());
  CHECK_FALSE(tap.active());
}

TEST_CASE("a tap copies at most its limit, and a sample of about its share", "[tap]") {
  state::FieldNames names;
  RecordTap tap({"dbl"}, names);
  auto now = RecordTap::Clock::now();
  tap.open(tap_message("limited", "dbl", "1", "7"), now);
  tap.open(tap_message("sampled", "dbl", "0.25", "0"), now);
  for (int k = 0; k < 40; ++k) tap.offer(0, counter(names, k * 100, 100));
  auto due = tap.take_due(now, true);
  REQUIRE(due.size() == 2);
  CHECK(line_count(due[0].get("lines")) == 7);
  std::size_t sampled = line_count(due[1].get("lines"));
  CHECK(sampled > 800); // 4000 records at 0.25: 1000 expected, sd about 27
  CHECK(sampled < 1200);
}

TEST_CASE("a tap skips and counts what does not fit before the next send", "[tap]") {
  state::FieldNames names;
  RecordTap tap({"dbl"}, names);
  auto now = RecordTap::Clock::now();
  tap.open(tap_message("t", "dbl", "1", "0"), now);
  for (int k = 0; k < 100; ++k) tap.offer(0, counter(names, k * 1000, 1000));
  auto due = tap.take_due(now, true);
  REQUIRE(due.size() == 1);
  std::size_t sent = line_count(due[0].get("lines"));
  CHECK(due[0].get("lines").size() <= runtime::kTapMaxBytes + 64);
  CHECK(sent + std::stoull(due[0].get("skipped")) == 100000);
  CHECK(sent < 100000);
}

TEST_CASE("a tap ends at UNTAP, and when its lease is not renewed", "[tap]") {
  state::FieldNames names;
  RecordTap tap({"dbl"}, names);
  auto now = RecordTap::Clock::now();
  tap.open(tap_message("a", "dbl", "1", "0"), now);
  tap.open(tap_message("b", "dbl", "1", "0"), now);
  tap.close("a");
  tap.offer(0, counter(names, 0, 1));
  auto due = tap.take_due(now, true);
  REQUIRE(due.size() == 1);
  CHECK(due[0].get("tap") == "b");
  // Renewed at now + 4 s: alive at now + 8 s, gone after now + 9 s.
  tap.open(tap_message("b", "dbl", "1", "0"), now + std::chrono::seconds(4));
  tap.take_due(now + std::chrono::seconds(8), true);
  CHECK(tap.active());
  tap.take_due(now + std::chrono::seconds(10), true);
  CHECK_FALSE(tap.active());
}
