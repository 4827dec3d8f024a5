#pragma once
// Event time at a source (SPEC §7): `event_time` names a field or gives an expression whose
// value is epoch milliseconds (an int) or an RFC 3339 string; `watermark = { max_delay,
// idle_timeout }` says how far behind its largest event time a source subtask's watermark
// stays, and when a silent subtask stops holding the watermark back.

#include <cstdint>
#include <memory>
#include <vector>

#include "operators/operator.hpp"
#include "state/error.hpp"
#include "pipeline/spec/expression.hpp"
#include "pipeline/spec/node_schema.hpp"

namespace streamctl::operators {

// The keys every source has for event time.
std::vector<pipeline::KeySchema> event_time_keys();

inline constexpr std::int64_t kWatermarkMin = INT64_MIN;
inline constexpr std::int64_t kWatermarkMax = INT64_MAX; // end of input: every window fires

// Stamps records with their event time and derives the source subtask's watermark: the
// largest event time so far minus max_delay, exactly. Records whose event time is missing or
// not a time go to on_error. Not thread-safe (one per source subtask).
class TimestampAssigner {
public:
  // Null when the node has no `event_time`. Throws ExpressionError for a bad expression.
  static std::unique_ptr<TimestampAssigner> from_node(const pipeline::NodeSpec& node, state::FieldNames& names);

  // Copies the records of `in` that have an event time into `out`, stamped. `origins`, when
  // it has one entry per record (Source::last_poll_origins), names the raw line and its number
  // in the bad-record message of a record without an event time.
  void assign(const state::Batch& in, state::Batch& out, const OperatorContext& ctx,
              std::span<const Source::RecordOrigin> origins = {});
  std::int64_t watermark() const { return watermark_; }
  std::int64_t idle_timeout_ms() const { return idle_timeout_ms_; } // 0: never idle

private:
  TimestampAssigner(pipeline::Expression expression, std::int64_t max_delay_ms, std::int64_t idle_timeout_ms)
      : expression_(std::move(expression)), max_delay_ms_(max_delay_ms), idle_timeout_ms_(idle_timeout_ms) {}

  pipeline::Expression expression_;
  std::int64_t max_delay_ms_;
  std::int64_t idle_timeout_ms_;
  std::int64_t watermark_ = kWatermarkMin;
  state::Arena scratch_{4096};
  pipeline::EvalContext eval_;
  std::vector<state::Value> values_; // the expression of each record of the batch
};

// Event time of a value: an int is epoch ms, a float is truncated, a string is RFC 3339.
Result<std::int64_t> event_time_of(const state::Value& value);

} // namespace streamctl::operators
