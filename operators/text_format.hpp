#pragma once
// The text formats of sources and sinks (SPEC §4): json, csv and lines, read from and written
// to lines of text. Built once per node from its `format`, `columns`, `types` and `delimiter`.

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/spec/pipeline_spec.hpp"
#include "state/batch.hpp"
#include "state/csv.hpp"
#include "state/error.hpp"
#include "state/json_reader.hpp"
#include "state/json_writer.hpp"

namespace streamctl::operators {

enum class TextFormat { Json, Csv, Lines };

TextFormat text_format_of(const pipeline::NodeSpec& node); // `format`, default json

// Turns lines into records appended to a batch. Not thread-safe (one per subtask).
class LineDecoder {
public:
  // Throws Error(Usage) for a bad csv `types` entry.
  LineDecoder(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node, state::FieldNames& names);
  // Appends the record of `line` to `batch` (the caller makes `batch` retain the line's memory),
  // or returns the reason it cannot. A csv header line is consumed and appends nothing.
  Result<void> decode(std::string_view line, state::Batch& batch);

private:
  TextFormat format_;
  state::FieldNames& names_;
  state::FieldId line_field_;
  std::unique_ptr<state::CsvReader> csv_;
  state::JsonReader json_;
  state::RecordBuilder builder_;
  // By FieldId: the fields anything downstream reads (projection.hpp); empty: every field.
  // The others are checked (a bad value still makes a bad record) but not kept: json skips
  // them while parsing (kept_json_), csv drops them after.
  std::vector<bool> keep_;
  // Or by FieldId the fields nobody downstream reads when that is "every field but these"
  // (a map's `remove` before a sink of whole records); empty: none left out.
  std::vector<bool> left_out_;
  std::optional<state::KeptKeys> kept_json_;
};

// Turns records into lines (with "\n"). Not thread-safe (one per subtask).
class LineEncoder {
public:
  LineEncoder(const pipeline::NodeSpec& node, state::FieldNames& names);
  // Appends the lines of every record of `batch`, with a csv header before the first. With
  // `record_starts`, appends where in `out` each record's line begins (after the header), for
  // a sink that sends records one by one (zmq).
  void encode(const state::Batch& batch, std::string& out,
              std::vector<std::size_t>* record_starts = nullptr);

private:
  TextFormat format_;
  state::FieldNames& names_;
  state::FieldId line_field_;
  std::vector<std::string> csv_columns_;
  std::vector<state::FieldId> csv_column_ids_;
  bool header_written_ = false;
  state::CsvWriter csv_writer_;
  state::JsonRecordWriter json_writer_;
};

} // namespace streamctl::operators
