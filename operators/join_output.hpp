#pragma once
// The rows a join emits for its matching pairs (SPEC §6 "join").
//
// Default: the left record's fields in their order, then the right record's fields whose names
// the left lacks, in their order (on a clash the left wins). With `select = { name = "expr" }`:
// exactly the selected fields, in the order the file gives them; each expression is evaluated
// over a record of two map fields, `left` and `right`, holding the two records, so that
// `left.user` and `right.price` are ordinary field paths. That record is built in scratch
// space (it points at the two records' fields; nothing is copied).
//
// Not thread-safe: one per subtask (it keeps scratch space).

#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/spec/expression.hpp"
#include "pipeline/spec/pipeline_spec.hpp"
#include "state/batch.hpp"
#include "state/field_names.hpp"

namespace streamctl::operators {

class JoinOutput {
public:
  // Reads `select` (absent: the default output). Throws Error(Usage) with the position for a
  // bad expression or one that reads a field other than left.* and right.*.
  static JoinOutput from_node(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node,
                              state::FieldNames& names);

  // Appends the row of (left, right) to `out` with event time `timestamp`. The values of both
  // records must stay alive as long as `out` (in its arena or memory it retains); strings that
  // `select` makes go into eval.arena. Returns false, with eval.error set, when a select
  // expression fails ("select.NAME: reason"): pair() is then the record to report.
  bool emit(const state::Record& left, const state::Record& right, std::int64_t timestamp,
            state::Batch& out, pipeline::EvalContext& eval);

  // The {"left": {...}, "right": {...}} record of the last emit() with `select`.
  const state::Record& pair() const { return pair_; }

  JoinOutput(JoinOutput&&) noexcept = default;
  JoinOutput& operator=(JoinOutput&&) noexcept = default;

private:
  struct Selected {
    state::FieldId name;
    std::string label; // "select.NAME", for messages
    pipeline::Expression expression;
  };
  JoinOutput() = default;

  std::vector<Selected> select_;
  state::FieldId left_id_ = 0;
  state::FieldId right_id_ = 0;
  state::Field pair_fields_[2];
  state::Record pair_;
  state::RecordBuilder builder_;
};

} // namespace streamctl::operators
