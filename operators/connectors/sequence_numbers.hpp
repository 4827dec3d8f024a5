#pragma once
// `sequence_field = "NAME"` of the tcp, zmq and exec sinks: a number in every record that a
// replay after a restore gives to the same record again, so that a peer outside the job can
// drop the duplicates that at-least-once output to it brings (SPEC §6-§7).
//
// The number is `subtask × 10^12 + n`: `n` counts the records this sink subtask has written,
// from 0, and is checkpointed with the sink (pre_commit), so a restore from a checkpoint goes
// on from the count it covers and numbers the replayed records as before. A peer deduplicates
// by the numbers it has seen, or, as each subtask numbers in order, by keeping per
// `seq div 10^12` the highest `seq mod 10^12` and dropping anything at or below it.
//
// The same record gets the same number when the sink subtask receives its input in the same
// order on replay: a sink subtask that reads one upstream subtask (equal parallelism, forward
// edges, or everything at parallelism 1), and checkpoints in the default `exactly-once` mode
// (at-least-once checkpoints do not align, so a checkpoint's count may include records that
// are replayed). A restore at another parallelism (rescale) starts every subtask above every
// number given before, under any subtask index: no new record reuses a number a peer has
// seen, but records replayed across the rescale arrive again under new numbers.
//
// Not thread-safe: owned by the sink's task thread.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "state/batch.hpp"
#include "state/error.hpp"
#include "state/field_names.hpp"

namespace streamctl::connectors {

inline constexpr std::int64_t kSequencePerSubtask = 1'000'000'000'000; // 10^12

class SequenceNumbers {
public:
  SequenceNumbers(state::FieldId field, int subtask) : field_(field), subtask_(subtask) {}

  // Appends to `out` each record of `in` with the field set to its number (replaced when the
  // record has it already). `out` shares `in`'s memory.
  void stamp(const state::Batch& in, state::Batch& out);

  // The sink's checkpointed count (format in sequence_numbers.cpp).
  void snapshot(std::string& out) const;
  // From the counts of EVERY old subtask (empty ones count 0), for subtask `subtask` of
  // `parallelism`.
  Result<void> restore(const std::vector<std::string_view>& old_subtasks, int parallelism,
                       const std::string& node);

  std::uint64_t next() const { return next_; }

private:
  state::FieldId field_;
  std::int64_t subtask_;
  std::uint64_t next_ = 0;    // n of the next record
  std::uint64_t highest_ = 0; // above every n any subtask index has used, as far as known
  state::RecordBuilder builder_;
};

} // namespace streamctl::connectors
