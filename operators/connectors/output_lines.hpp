#pragma once
// What the tcp, zmq and exec sinks send: each record as a line of its `format` (json, csv,
// lines; operators/text_format.hpp), numbered first when `sequence_field` is set
// (sequence_numbers.hpp), and the keys every such sink takes.

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "operators/connectors/sequence_numbers.hpp"
#include "operators/text_format.hpp"
#include "pipeline/spec/node_schema.hpp"

namespace streamctl::connectors {

// format, columns, ..., and sequence_field.
std::vector<pipeline::KeySchema> output_line_keys();

// Not thread-safe: one per sink subtask, on its task thread.
class OutputLines {
public:
  OutputLines(const pipeline::NodeSpec& node, state::FieldNames& names);
  // Called from the sink's open(): numbers depend on the subtask.
  void open(int subtask);

  // Appends the lines of `batch` to `out` (each with its "\n"). With `record_starts`, also the
  // offset in `out` where each record's line begins: a csv header, written once before the
  // first record, lies outside every record's line.
  void encode(const state::Batch& batch, std::string& out,
              std::vector<std::size_t>* record_starts = nullptr);

  // The sink's checkpointed state: the sequence count, or nothing without `sequence_field`.
  void snapshot(std::string& out) const;
  Result<void> restore(const std::vector<std::string_view>& old_subtasks, int parallelism,
                       const std::string& node);

private:
  operators::LineEncoder encoder_;
  std::optional<state::FieldId> sequence_field_;
  std::optional<SequenceNumbers> sequence_;
  state::Batch stamped_;
};

} // namespace streamctl::connectors
