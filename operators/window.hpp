#pragma once
// `type = "window"`: keyed windows with incremental aggregates (SPEC §6, §7).
//
// Each (key, window) keeps one Aggregates block and nothing else: records are added as they
// arrive and never buffered. A window [start, end) fires when the watermark reaches `end`:
// it emits one record, the key fields, then `window_start` and `window_end` (epoch ms), then
// the aggregates in table order, stamped with event time end - 1 so that a downstream window
// can window it again. A record that arrives after its window fired, but while the watermark
// is still below end + allowed_lateness, updates the window and re-emits its row at once; the
// window's state is dropped when the watermark reaches end + allowed_lateness. A record late
// for every window it belongs to goes, unchanged, to the late output when a node reads it, and
// is a bad record (the node's on_error) otherwise.
//
// A record without event time (state::kNoTimestamp: the pipeline has no `event_time`) is
// windowed by processing time at its arrival, and its windows fire when processing time
// reaches their end (no lateness applies; the rows carry no event time). At the end of input
// every window still held fires; a firing hands its rows downstream every fired_chunk_rows
// (OperatorContext::pass_on_fired), so that it never holds millions of rows at once.
//
// Keyed state lives per key group (state::KeyedMap, state::TimerService) so that it can be
// snapshotted, restored and rescaled by key group: event-time timers fire windows at their end
// and drop them at end + allowed_lateness. The tumbling and sliding windows live in
// window.cpp, session windows in session_windows.cpp, each with a drawing of its state and
// timers; both build on WindowOperatorBase below.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "operators/aggregates.hpp"
#include "operators/key_fields.hpp"
#include "operators/registry.hpp"
#include "operators/window_assigner.hpp"
#include "state/arena.hpp"

namespace streamctl::operators {

pipeline::NodeTypeSchema window_schema();
std::unique_ptr<Operator> make_window(const pipeline::PipelineSpec&, const pipeline::NodeSpec&,
                                      state::FieldNames&);

// The node's `aggregates` table, compiled. Throws Error(Usage) at the entry's position.
Aggregates window_aggregates(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node,
                             state::FieldNames& names);

// A window node's compiled settings.
struct WindowSettings {
  KeyFields key;
  std::vector<state::FieldId> key_names; // the key fields, in order, for rows made at firing
  Aggregates aggregates;
  WindowSpec window;
  state::FieldId window_start;
  state::FieldId window_end;
  // Senders may combine records into partial aggregates (window_combiner.hpp), which come as
  // records of these two fields.
  bool combinable = false;
  state::FieldId partial_key = 0;
  state::FieldId partial_state = 0;
};

// What the aligned (tumbling, sliding) and session implementations share: the settings, the
// rows they emit, and what becomes of late records.
class WindowOperatorBase : public Operator {
protected:
  explicit WindowOperatorBase(WindowSettings settings);

  // Per batch: the watermark-independent context of evaluation (arena, now()).
  void begin_batch(std::int64_t now);

  // Appends the row of one window: the key fields (decoded from the key bytes: an integral
  // float key such as 2.0 comes out as 2), window_start, window_end, then the aggregates.
  void emit_row(std::string_view key_bytes, std::int64_t start, std::int64_t end,
                const std::byte* block, std::int64_t timestamp, state::Batch& out);

  // While firing (on_watermark, on_processing_time, finish; never from process()): hands the
  // rows in `out` downstream once there are fired_chunk_rows of them, so that firing millions
  // of windows at once (the end of input) never holds all their rows.
  void pass_on_if_full(state::Batch& out) {
    if (out.size() >= fired_chunk_rows && ctx_.pass_on_fired) ctx_.pass_on_fired(out);
  }
  static constexpr std::size_t fired_chunk_rows = 4096;

  // The key fields, window_start and window_end of a row, begun in builder_.
  void begin_row(std::string_view key_bytes, std::int64_t start, std::int64_t end, state::Batch& out);
  // Whether `record` is a partial aggregate from a sender that combines (window_combiner.hpp),
  // and then its key bytes and its block's binary form.
  bool partial_of(const state::Record& record, std::string_view& key, std::string_view& block) const;
  // A partial that cannot be merged: a bad record showing its key and pane.
  void bad_partial(std::string_view key_bytes, std::int64_t pane_start, std::string_view reason);

  // A record late for every window it belongs to: to the late output, else a bad record.
  // `retained` tracks whether the late output already retains `in`'s memory.
  void late_record(const state::Batch& in, const state::Record& record, bool& retained);
  // A record whose windows at `time` fall outside the supported range of times.
  void out_of_range(const state::Record& record, std::int64_t time);

  // Checkpointed state shared by every kind: the watermark is subtask state (see window.cpp).
public:
  bool has_state() const override { return true; }
  void snapshot_subtask_state(std::string& out) const override;
  Result<void> restore_subtask_state(const std::vector<std::string_view>& old_subtasks) override;

protected:
  // A failure of restore_key_group (key_group >= 0) or restore_subtask_state that names the
  // operator.
  Failure restore_failure(std::int64_t key_group, const std::string& why) const;

  // The event-time rows of a window that ends at `end`, and of a processing-time one.
  static std::int64_t row_timestamp(std::int64_t end) { return end - 1; }

  KeyFields key_;
  std::vector<state::FieldId> key_names_;
  Aggregates aggregates_;
  const WindowSpec window_;
  state::FieldId window_start_;
  state::FieldId window_end_;

  std::int64_t watermark_ = INT64_MIN;
  std::string key_bytes_; // scratch: the key of the record at hand
  pipeline::EvalContext eval_;
  state::Arena eval_arena_{4096}; // strings expressions make while adding; reset per batch
  state::RecordBuilder builder_;
  std::vector<state::Value> key_values_; // scratch: a key decoded for a row
  bool combinable_;
  state::FieldId partial_key_;
  state::FieldId partial_state_;
};

} // namespace streamctl::operators
