#include "operators/connectors/sequence_numbers.hpp"

#include <algorithm>

#include "operators/source_position.hpp"

namespace streamctl::connectors {

namespace {

// The count a sink checkpoints, version 1 (integers little-endian):
//
//   u8  version = 1
//   u8  kind = 'Q'
//   u64 n of the next record this subtask writes
//   u64 a bound above every n any subtask index had used when this subtask last restored
constexpr std::uint8_t kVersion = 1;
constexpr char kKind = 'Q';

} // namespace

void SequenceNumbers::stamp(const state::Batch& in, state::Batch& out) {
  out.retain_memory_of(in);
  for (const auto& record : in) {
    builder_.assign(record);
    builder_.set(field_, state::Value::integer(subtask_ * kSequencePerSubtask +
                                               static_cast<std::int64_t>(next_)));
    builder_.finish(out);
    ++next_;
  }
}

void SequenceNumbers::snapshot(std::string& out) const {
  operators::PositionWriter w(out, kVersion, kKind);
  w.u64(next_);
  w.u64(std::max(highest_, next_));
}

Result<void> SequenceNumbers::restore(const std::vector<std::string_view>& old_subtasks,
                                      int parallelism, const std::string& node) {
  std::vector<std::uint64_t> next(old_subtasks.size(), 0);
  std::uint64_t highest = 0;
  for (std::size_t s = 0; s < old_subtasks.size(); ++s) {
    if (old_subtasks[s].empty()) continue;
    operators::PositionReader r(old_subtasks[s], "sequence numbers of sink '" + node + "'");
    if (auto ok = r.header(kVersion, kKind); !ok) return ok;
    auto n = r.u64();
    if (!n) return Failure{n.error()};
    auto bound = r.u64();
    if (!bound) return Failure{bound.error()};
    if (auto ok = r.end(); !ok) return ok;
    if (*n >= static_cast<std::uint64_t>(kSequencePerSubtask))
      return r.failure("count out of range");
    next[s] = *n;
    highest = std::max({highest, *n, *bound});
  }
  highest_ = highest;
  const auto me = static_cast<std::size_t>(subtask_);
  // Same parallelism: go on from this subtask's own count, so replayed records get their
  // numbers again. Another: above everything, so that no number is given twice.
  next_ = old_subtasks.size() == static_cast<std::size_t>(parallelism) && me < next.size()
              ? next[me]
              : highest;
  return {};
}

} // namespace streamctl::connectors
