// Sequence numbers of the tcp, zmq and exec sinks (sequence_numbers.hpp): a restore at the same
// parallelism numbers the replayed records as the first time; a restore at another parallelism
// never gives a number twice, under any subtask index; a corrupt count is refused.

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "operators/connectors/sequence_numbers.hpp"

using streamctl::connectors::kSequencePerSubtask;
using streamctl::connectors::SequenceNumbers;
using streamctl::state::Batch;
using streamctl::state::Field;
using streamctl::state::FieldNames;
using streamctl::state::Value;

namespace {

Batch records(FieldNames& names, int from, int count) {
  Batch batch;
  for (int k = from; k < from + count; ++k) {
    Field f{names.intern("x"), Value::integer(k)};
    batch.add(std::span<const Field>(&f, 1));
  }
  return batch;
}

std::vector<std::int64_t> numbers(FieldNames& names, SequenceNumbers& seq, const Batch& in) {
  Batch out;
  seq.stamp(in, out);
  std::vector<std::int64_t> got;
  for (const auto& r : out)
    got.push_back(r.find(names.intern("sn"))->i);
  return got;
}

} // namespace

TEST_CASE("a restore at the same parallelism numbers replayed records as before", "[sequence]") {
  FieldNames names;
  SequenceNumbers first(names.intern("sn"), 1);
  numbers(names, first, records(names, 0, 5));
  std::string state;
  first.snapshot(state);
  auto after_checkpoint = numbers(names, first, records(names, 5, 3));
  REQUIRE(after_checkpoint == std::vector<std::int64_t>{kSequencePerSubtask + 5,
                                                        kSequencePerSubtask + 6,
                                                        kSequencePerSubtask + 7});

  SequenceNumbers replay(names.intern("sn"), 1);
  REQUIRE(replay.restore({std::string_view(), state}, 2, "out"));
  REQUIRE(numbers(names, replay, records(names, 5, 3)) == after_checkpoint);
}

TEST_CASE("a restore at another parallelism numbers above everything given before", "[sequence]") {
  FieldNames names;
  SequenceNumbers a(names.intern("sn"), 0), b(names.intern("sn"), 1);
  numbers(names, a, records(names, 0, 3));
  numbers(names, b, records(names, 0, 10));
  std::string sa, sb;
  a.snapshot(sa);
  b.snapshot(sb);

  // 2 -> 1: subtask 0 goes on above subtask 1's 10.
  SequenceNumbers one(names.intern("sn"), 0);
  REQUIRE(one.restore({sa, sb}, 1, "out"));
  REQUIRE(one.next() == 10);
  numbers(names, one, records(names, 0, 2));
  std::string s1;
  one.snapshot(s1);

  // 1 -> 2: subtask 1 must not give 1·10^12 + 0..9 again, which the first run used.
  SequenceNumbers again(names.intern("sn"), 1);
  REQUIRE(again.restore({s1}, 2, "out"));
  REQUIRE(again.next() >= 12);
}

TEST_CASE("a corrupt count is refused", "[sequence]") {
  FieldNames names;
  SequenceNumbers seq(names.intern("sn"), 0);
  auto bad = seq.restore({std::string_view("\x01Q\x05", 3)}, 1, "out");
  REQUIRE(!bad);
  REQUIRE(bad.error().find("sequence numbers of sink 'out'") != std::string::npos);
}
