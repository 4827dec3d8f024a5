#pragma once
// The `csv` format (SPEC §4): RFC 4180 within one line. A field may be quoted, with "" for a
// quote and the delimiter allowed inside the quotes; a quoted field that spans lines (a newline
// inside quotes) is NOT supported, because sources split their input into lines before parsing:
// such a line fails with "unterminated quoted field". A trailing '\r' (CRLF files) is ignored.
// A line that is not UTF-8 is refused (a header that is not makes every row fail).
//
// Without `types` every value is a string. `types` converts the named columns to int, float or
// bool; an empty unquoted cell of a typed column is null.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "state/batch.hpp"
#include "state/error.hpp"
#include "state/field_names.hpp"
#include "state/value.hpp"

namespace streamctl::state {

struct CsvOptions {
  char delimiter = ',';
  // The first line is a header. It names the columns unless `columns` is given, in which case
  // it is skipped.
  bool header = true;
  std::vector<std::string> columns;
  // Column name -> Kind::Int, Kind::Float, Kind::Bool (or Kind::String, the default).
  std::vector<std::pair<std::string, Kind>> types;
};

// Parses lines into records. Zero copy: an unquoted cell, or a quoted one without "" inside,
// points into the line, so the caller must make the batch retain the line's memory; a quoted
// cell with "" is unescaped into the batch's arena. Not thread-safe: one reader per source.
class CsvReader {
public:
  CsvReader(CsvOptions options, FieldNames& names);

  // True until the header line has been read, when the options say there is one.
  bool needs_header() const { return options_.header && !header_read_; }
  // Reads the header line: names the columns (unless `columns` was given) and checks that every
  // typed column exists.
  Result<void> read_header(std::string_view line);
  // Appends one field per column to `builder` (the caller resets it before, finishes after).
  Result<void> parse_line(std::string_view line, Batch& batch, RecordBuilder& builder);

  // The column ids, once known (after the header, or from `columns`).
  std::span<const FieldId> columns() const { return columns_; }

private:
  struct Cell {
    const char* data;
    std::uint32_t size;
    bool quoted;
    bool has_escaped_quotes; // "" inside a quoted cell
    std::uint32_t column;    // 1-based byte column where the cell starts
  };

  Result<void> split(std::string_view line);
  Result<void> set_columns(const std::vector<std::string>& names);
  Result<void> convert(const Cell& cell, std::size_t index, Batch& batch, Value& out);

  CsvOptions options_;
  FieldNames& names_;
  bool header_read_ = false;
  std::vector<FieldId> columns_;
  std::vector<std::string> column_names_;
  std::vector<Kind> kinds_; // by column
  std::string setup_error_; // a problem with columns/types, reported on every line
  std::vector<Cell> cells_; // scratch, reused across lines
};

// Writes records as CSV lines. Cells are quoted when they hold the delimiter, a quote, CR or LF;
// null and missing fields are empty; arrays and maps are written as JSON text. Like
// append_json, no line terminator is appended: the caller adds "\n".
class CsvWriter {
public:
  explicit CsvWriter(char delimiter = ',') : delimiter_(delimiter) {}

  void append_header(std::span<const std::string> columns, std::string& out);
  void append_row(const Record& r, std::span<const FieldId> columns, const FieldNames& names,
                  std::string& out);

private:
  void append_cell(std::string_view text, std::string& out);

  char delimiter_;
  std::string scratch_; // a nested value's JSON text
};

} // namespace streamctl::state
