#include "state/csv.hpp"

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <system_error>

#include "state/json_writer.hpp"
#include "state/utf8.hpp"

namespace streamctl::state {

namespace {

std::string_view trim_line_end(std::string_view line) {
  if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

std::string_view trim_spaces(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool equals_ignoring_case(std::string_view a, std::string_view lower) {
  if (a.size() != lower.size()) return false;
  for (std::size_t k = 0; k < a.size(); ++k) {
    char c = a[k];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != lower[k]) return false;
  }
  return true;
}

// Every text format takes UTF-8 only (SPEC §4): a row's cells become JSON strings.
Result<void> check_utf8(std::string_view line) {
  std::size_t at = find_invalid_utf8(line);
  if (at == std::string_view::npos) return {};
  return fail(invalid_utf8_reason(static_cast<unsigned char>(line[at])) + " at column " + std::to_string(at + 1));
}

// A cell quoted for an error message, cut short when long.
std::string shown(std::string_view text) {
  constexpr std::size_t limit = 64;
  if (text.size() <= limit) return std::string(text);
  return std::string(text.substr(0, limit)) + "...";
}

} // namespace

CsvReader::CsvReader(CsvOptions options, FieldNames& names)
    : options_(std::move(options)), names_(names) {
  if (!options_.columns.empty()) {
    auto r = set_columns(options_.columns);
    if (!r) setup_error_ = r.error();
  } else if (!options_.header) {
    setup_error_ = "csv without a header line needs `columns`";
  }
}

Result<void> CsvReader::set_columns(const std::vector<std::string>& column_names) {
  columns_.clear();
  column_names_ = column_names;
  kinds_.assign(column_names.size(), Kind::String);
  for (std::size_t k = 0; k < column_names.size(); ++k) {
    for (std::size_t m = 0; m < k; ++m)
      if (column_names[m] == column_names[k])
        return fail("duplicate column '" + column_names[k] + "'");
    columns_.push_back(names_.intern(column_names[k]));
  }
  for (const auto& [name, kind] : options_.types) {
    if (kind != Kind::Int && kind != Kind::Float && kind != Kind::Bool && kind != Kind::String)
      return fail("column '" + name + "': cannot convert csv cells to " + kind_name(kind));
    std::size_t k = 0;
    while (k < column_names.size() && column_names[k] != name) ++k;
    if (k == column_names.size()) return fail("types name column '" + name + "', which is missing");
    kinds_[k] = kind;
  }
  return {};
}

// Splits a line (without its terminator) into cells_.
Result<void> CsvReader::split(std::string_view line) {
  cells_.clear();
  const char* begin = line.data();
  const char* end = begin + line.size();
  const char* p = begin;
  char delimiter = options_.delimiter;
  for (;;) {
    auto column = static_cast<std::uint32_t>(p - begin + 1);
    if (p < end && *p == '"') {
      const char* q = p + 1;
      bool escaped = false;
      for (;;) {
        q = static_cast<const char*>(std::memchr(q, '"', static_cast<std::size_t>(end - q)));
        if (q == nullptr)
          return fail("unterminated quoted field at column " + std::to_string(column) +
                      " (a quoted field cannot span lines)");
        if (q + 1 < end && q[1] == '"') {
          escaped = true;
          q += 2;
          continue;
        }
        break;
      }
      cells_.push_back(Cell{p + 1, static_cast<std::uint32_t>(q - p - 1), true, escaped, column});
      p = q + 1;
      if (p < end && *p != delimiter)
        return fail("expected a delimiter after the closing quote at column " +
                    std::to_string(p - begin + 1));
    } else {
      const char* d =
          static_cast<const char*>(std::memchr(p, delimiter, static_cast<std::size_t>(end - p)));
      if (d == nullptr) d = end;
      cells_.push_back(Cell{p, static_cast<std::uint32_t>(d - p), false, false, column});
      p = d;
    }
    if (p >= end) return {};
    ++p; // the delimiter
  }
}

Result<void> CsvReader::read_header(std::string_view line) {
  header_read_ = true;
  if (!options_.columns.empty()) return {}; // named by the options: the header is skipped
  line = trim_line_end(line);
  if (auto r = check_utf8(line); !r) {
    setup_error_ = "bad header: " + r.error(); // every row is bad: none is misread as a header
    return fail(setup_error_);
  }
  if (line.size() >= 3 && std::memcmp(line.data(), "\xEF\xBB\xBF", 3) == 0)
    line.remove_prefix(3); // a UTF-8 byte order mark
  if (line.size() > std::numeric_limits<std::uint32_t>::max()) return fail("line too long");
  if (auto r = split(line); !r) {
    setup_error_ = "bad header: " + r.error();
    return fail(setup_error_);
  }
  std::vector<std::string> header;
  header.reserve(cells_.size());
  for (const Cell& c : cells_) {
    std::string name(c.data, c.size);
    if (c.has_escaped_quotes) {
      std::string unescaped;
      for (std::size_t k = 0; k < name.size(); ++k) {
        unescaped += name[k];
        if (name[k] == '"') ++k; // "" -> "
      }
      name = std::move(unescaped);
    }
    header.push_back(std::move(name));
  }
  if (auto r = set_columns(header); !r) {
    setup_error_ = r.error();
    return r;
  }
  setup_error_.clear();
  return {};
}

Result<void> CsvReader::convert(const Cell& cell, std::size_t index, Batch& batch, Value& out) {
  std::string_view text(cell.data, cell.size);
  if (cell.has_escaped_quotes) {
    char* dst = static_cast<char*>(batch.arena().allocate(cell.size, 1));
    std::size_t n = 0;
    for (std::size_t k = 0; k < cell.size; ++k) {
      dst[n++] = cell.data[k];
      if (cell.data[k] == '"') ++k; // "" -> "
    }
    text = std::string_view(dst, n);
  }
  Kind kind = kinds_[index];
  if (kind == Kind::String) {
    out = Value::string(text);
    return {};
  }
  if (!cell.quoted && text.empty()) {
    out = Value::null();
    return {};
  }
  std::string_view t = trim_spaces(text);
  if (!t.empty() && t.front() == '+') t.remove_prefix(1);
  const char* end = t.data() + t.size();
  switch (kind) {
  case Kind::Int: {
    std::int64_t v = 0;
    auto [ptr, ec] = std::from_chars(t.data(), end, v);
    if (ec == std::errc() && ptr == end && !t.empty()) {
      out = Value::integer(v);
      return {};
    }
    break;
  }
  case Kind::Float: {
    double v = 0;
    auto [ptr, ec] = std::from_chars(t.data(), end, v);
    if (ec == std::errc() && ptr == end && !t.empty()) {
      out = Value::floating(v);
      return {};
    }
    break;
  }
  case Kind::Bool:
    if (equals_ignoring_case(t, "true") || t == "1") {
      out = Value::boolean(true);
      return {};
    }
    if (equals_ignoring_case(t, "false") || t == "0") {
      out = Value::boolean(false);
      return {};
    }
    break;
  default: break;
  }
  return fail("column '" + column_names_[index] + "': cannot convert '" + shown(text) + "' to " +
              kind_name(kind));
}

Result<void> CsvReader::parse_line(std::string_view line, Batch& batch, RecordBuilder& builder) {
  if (!setup_error_.empty()) return fail(setup_error_);
  if (needs_header()) return fail("the csv header line has not been read");
  line = trim_line_end(line);
  if (line.size() > std::numeric_limits<std::uint32_t>::max()) return fail("line too long");
  if (auto r = check_utf8(line); !r) return r;
  if (auto r = split(line); !r) return r;
  if (cells_.size() != columns_.size())
    return fail("expected " + std::to_string(columns_.size()) + " columns, got " +
                std::to_string(cells_.size()));
  for (std::size_t k = 0; k < cells_.size(); ++k) {
    Value v;
    if (auto r = convert(cells_[k], k, batch, v); !r) return r;
    builder.append(columns_[k], v);
  }
  return {};
}

void CsvWriter::append_cell(std::string_view text, std::string& out) {
  bool quote = false;
  for (char c : text)
    if (c == delimiter_ || c == '"' || c == '\n' || c == '\r') {
      quote = true;
      break;
    }
  if (!quote) {
    out += text;
    return;
  }
  out += '"';
  std::size_t run = 0;
  for (std::size_t k = 0; k < text.size(); ++k)
    if (text[k] == '"') {
      out.append(text.data() + run, k + 1 - run); // up to and including the quote
      out += '"';
      run = k + 1;
    }
  out.append(text.data() + run, text.size() - run);
  out += '"';
}

void CsvWriter::append_header(std::span<const std::string> columns, std::string& out) {
  for (std::size_t k = 0; k < columns.size(); ++k) {
    if (k != 0) out += delimiter_;
    append_cell(columns[k], out);
  }
}

void CsvWriter::append_row(const Record& r, std::span<const FieldId> columns,
                           const FieldNames& names, std::string& out) {
  for (std::size_t k = 0; k < columns.size(); ++k) {
    if (k != 0) out += delimiter_;
    const Value* v = r.find(columns[k]);
    if (v == nullptr) continue;
    switch (v->kind) {
    case Kind::Null: break;
    case Kind::Bool: out += v->b ? "true" : "false"; break;
    case Kind::Int: {
      char buf[24];
      auto res = std::to_chars(buf, buf + sizeof buf, v->i);
      out.append(buf, res.ptr);
      break;
    }
    case Kind::Float:
      if (std::isfinite(v->f)) append_json_value(*v, names, out); // else empty, as null
      break;
    case Kind::String: append_cell(v->str(), out); break;
    case Kind::Array:
    case Kind::Map:
      scratch_.clear();
      append_json_value(*v, names, scratch_);
      append_cell(scratch_, out);
      break;
    }
  }
}

} // namespace streamctl::state
