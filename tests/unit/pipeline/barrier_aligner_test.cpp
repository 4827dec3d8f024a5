// Barrier alignment (pipeline/runtime/barrier_aligner): what is held in exactly-once and not
// in at-least-once, when an alignment completes (barriers, ended channels), what a newer
// barrier does to an older alignment, and the order in which frames come back for replay.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include <zmq.hpp>

#include "pipeline/runtime/barrier_aligner.hpp"

using streamctl::runtime::BarrierAligner;
using Outcome = BarrierAligner::Outcome;

namespace {

zmq::message_t frame(const std::string& text) { return zmq::message_t(text); }

// Everything waiting for replay, in the order the task would process it.
std::vector<std::string> drain(BarrierAligner& a) {
  std::vector<std::string> out;
  zmq::message_t m;
  while (a.take_replay(m)) out.push_back(m.to_string());
  return out;
}

using Strings = std::vector<std::string>;

} // namespace

TEST_CASE("exactly-once holds frames only of channels whose barrier came", "[barrier_aligner]") {
  BarrierAligner a(3, true);
  CHECK_FALSE(a.blocked(0));
  CHECK(a.on_barrier(0, 1) == Outcome::Wait);
  CHECK(a.aligning() == 1);
  CHECK(a.blocked(0));
  CHECK_FALSE(a.blocked(1));
  CHECK_FALSE(a.blocked(2));
  a.hold(frame("c0-a"));
  CHECK(a.on_barrier(2, 1) == Outcome::Wait);
  CHECK(a.blocked(2));
  a.hold(frame("c2-a"));
  a.hold(frame("c0-b"));
  CHECK(a.held() == 3);
  CHECK_FALSE(a.has_replay()); // nothing is released before the alignment completes
  CHECK(a.on_barrier(1, 1) == Outcome::Complete);
}

TEST_CASE("after completion release replays the held frames in arrival order and unblocks", "[barrier_aligner]") {
  BarrierAligner a(2, true);
  REQUIRE(a.on_barrier(1, 4) == Outcome::Wait);
  a.hold(frame("x1"));
  a.hold(frame("x2"));
  a.hold(frame("x3"));
  REQUIRE(a.on_barrier(0, 4) == Outcome::Complete);
  a.release();
  CHECK(a.aligning() == 0);
  CHECK(a.held() == 0);
  CHECK_FALSE(a.blocked(0));
  CHECK_FALSE(a.blocked(1));
  CHECK(a.has_replay());
  CHECK(drain(a) == Strings{"x1", "x2", "x3"});
  CHECK_FALSE(a.has_replay());
}

TEST_CASE("at-least-once never blocks a channel but still completes on the last barrier", "[barrier_aligner]") {
  BarrierAligner a(3, false);
  CHECK(a.on_barrier(0, 1) == Outcome::Wait);
  CHECK_FALSE(a.blocked(0));
  CHECK(a.on_barrier(1, 1) == Outcome::Wait);
  CHECK_FALSE(a.blocked(1));
  CHECK(a.on_barrier(2, 1) == Outcome::Complete);
  CHECK(a.held() == 0);
  a.release();
  CHECK_FALSE(a.has_replay());
  CHECK(a.aligning() == 0);
}

TEST_CASE("a single input channel completes on its first barrier", "[barrier_aligner]") {
  BarrierAligner a(1, true);
  CHECK(a.on_barrier(0, 1) == Outcome::Complete);
  a.release();
  CHECK(a.on_barrier(0, 2) == Outcome::Complete);
}

TEST_CASE("a duplicate barrier on the same channel does not complete the alignment", "[barrier_aligner]") {
  BarrierAligner a(2, true);
  CHECK(a.on_barrier(0, 3) == Outcome::Wait);
  CHECK(a.on_barrier(0, 3) == Outcome::Wait);
  CHECK(a.on_barrier(1, 3) == Outcome::Complete);
}

TEST_CASE("barriers of a checkpoint already taken or older than the one aligning are ignored",
          "[barrier_aligner]") {
  BarrierAligner a(2, true);
  REQUIRE(a.on_barrier(0, 5) == Outcome::Wait);
  REQUIRE(a.on_barrier(1, 5) == Outcome::Complete);
  a.release();
  CHECK(a.on_barrier(0, 5) == Outcome::Ignored); // taken
  CHECK(a.on_barrier(0, 3) == Outcome::Ignored); // older still
  CHECK(a.aligning() == 0);
  CHECK_FALSE(a.blocked(0));

  REQUIRE(a.on_barrier(1, 7) == Outcome::Wait);
  CHECK(a.on_barrier(0, 6) == Outcome::Ignored); // older than the one aligning
  CHECK(a.aligning() == 7);
  CHECK_FALSE(a.blocked(0));
}

TEST_CASE("a newer barrier drops the older alignment and replays what it held", "[barrier_aligner]") {
  BarrierAligner a(2, true);
  REQUIRE(a.on_barrier(0, 1) == Outcome::Wait);
  a.hold(frame("old-1"));
  a.hold(frame("old-2"));
  // Channel 1 never delivered barrier 1: the coordinator gave it up and triggered 2.
  CHECK(a.on_barrier(1, 2) == Outcome::Wait);
  CHECK(a.aligning() == 2);
  CHECK(a.held() == 0);
  CHECK_FALSE(a.blocked(0)); // channel 0 owes barrier 2: its frames flow again
  CHECK(a.blocked(1));
  CHECK(drain(a) == Strings{"old-1", "old-2"});
  // The given-up checkpoint stays given up.
  CHECK(a.on_barrier(1, 1) == Outcome::Ignored);
  CHECK(a.on_barrier(0, 2) == Outcome::Complete);
}

TEST_CASE("frames given up by a dropped alignment replay before older replay frames", "[barrier_aligner]") {
  BarrierAligner a(2, true);
  // Checkpoint 1 completes with one frame held: it waits for replay.
  REQUIRE(a.on_barrier(0, 1) == Outcome::Wait);
  a.hold(frame("r1"));
  REQUIRE(a.on_barrier(1, 1) == Outcome::Complete);
  a.release();
  // Checkpoint 2 starts aligning before r1 was replayed, holds h1, then is given up for 3.
  REQUIRE(a.on_barrier(0, 2) == Outcome::Wait);
  a.hold(frame("h1"));
  REQUIRE(a.on_barrier(1, 3) == Outcome::Wait);
  CHECK(drain(a) == Strings{"h1", "r1"});
}

TEST_CASE("release puts held frames before frames still awaiting replay", "[barrier_aligner]") {
  BarrierAligner a(2, true);
  REQUIRE(a.on_barrier(0, 1) == Outcome::Wait);
  a.hold(frame("given-up-1"));
  a.hold(frame("given-up-2"));
  REQUIRE(a.on_barrier(1, 2) == Outcome::Wait); // replay: given-up-1, given-up-2
  a.hold(frame("held-1"));
  a.hold(frame("held-2"));
  REQUIRE(a.on_barrier(0, 2) == Outcome::Complete);
  a.release();
  CHECK(drain(a) == Strings{"held-1", "held-2", "given-up-1", "given-up-2"});
}

TEST_CASE("an ended channel owes no barrier and its end can complete an alignment", "[barrier_aligner]") {
  BarrierAligner a(3, true);
  REQUIRE(a.on_barrier(0, 1) == Outcome::Wait);
  a.hold(frame("held"));
  REQUIRE(a.on_barrier(1, 1) == Outcome::Wait);
  CHECK(a.on_end(2) == Outcome::Complete);
  a.release();
  CHECK(drain(a) == Strings{"held"});
  // Channel 2 stays ended: the next checkpoint needs only channels 0 and 1.
  CHECK(a.on_barrier(0, 2) == Outcome::Wait);
  CHECK(a.on_barrier(1, 2) == Outcome::Complete);
}

TEST_CASE("an end that leaves barriers owed keeps waiting", "[barrier_aligner]") {
  BarrierAligner a(3, true);
  REQUIRE(a.on_barrier(0, 1) == Outcome::Wait);
  CHECK(a.on_end(2) == Outcome::Wait); // channel 1 still owes barrier 1
  CHECK(a.on_barrier(1, 1) == Outcome::Complete);
}

TEST_CASE("an end with no alignment in progress is ignored but counts for the next one",
          "[barrier_aligner]") {
  BarrierAligner a(2, false);
  CHECK(a.on_end(1) == Outcome::Ignored);
  CHECK(a.aligning() == 0);
  CHECK(a.on_barrier(0, 1) == Outcome::Complete);
}

TEST_CASE("a channel that delivered the barrier and then ended no longer counts as delivered",
          "[barrier_aligner]") {
  // At-least-once: channel 0 delivers the barrier then ends; channel 1 still owes it.
  BarrierAligner a(2, false);
  REQUIRE(a.on_barrier(0, 1) == Outcome::Wait);
  CHECK(a.on_end(0) == Outcome::Wait);
  CHECK(a.on_barrier(1, 1) == Outcome::Complete);
}
