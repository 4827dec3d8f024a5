#include "pipeline/spec/source_text.hpp"

namespace streamctl::pipeline {

namespace {

bool is_continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// Byte index of 1-based code point column `column` in `line`.
std::size_t byte_of_column(std::string_view line, std::uint32_t column) {
  std::size_t b = 0;
  for (std::uint32_t c = 1; c < column && b < line.size(); ++c) {
    ++b;
    while (b < line.size() && is_continuation(line[b])) ++b;
  }
  return b;
}

std::uint32_t column_of_byte(std::string_view line, std::size_t byte) {
  std::uint32_t column = 1;
  for (std::size_t b = 0; b < byte && b < line.size(); ++b)
    if (!is_continuation(line[b])) ++column;
  return column;
}

std::size_t utf8_length(std::uint32_t cp) {
  if (cp < 0x80) return 1;
  if (cp < 0x800) return 2;
  if (cp < 0x10000) return 3;
  return 4;
}

std::uint32_t parse_hex(std::string_view s) {
  std::uint32_t v = 0;
  for (char c : s) {
    v <<= 4;
    if (c >= '0' && c <= '9')
      v |= static_cast<std::uint32_t>(c - '0');
    else if (c >= 'a' && c <= 'f')
      v |= static_cast<std::uint32_t>(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      v |= static_cast<std::uint32_t>(c - 'A' + 10);
  }
  return v;
}

bool only_blanks(std::string_view s) {
  for (char c : s)
    if (c != ' ' && c != '\t') return false;
  return true;
}

} // namespace

void SourceTexts::add(const std::string& path, std::string_view text) {
  std::vector<std::string_view> lines;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    start = end + 1;
  }
  lines_[path] = std::move(lines);
}

SourcePos SourceTexts::locate_in_string(const SourcePos& start, std::uint32_t offset) const {
  auto doc = lines_.find(start.file);
  if (doc == lines_.end() || start.line == 0 || start.line > doc->second.size()) return start;
  const auto& lines = doc->second;

  std::size_t line = start.line - 1;
  std::size_t b = byte_of_column(lines[line], start.column);
  std::string_view rest = lines[line].substr(b);
  // No quote: a --set value that was not TOML, taken as a string exactly as typed.
  bool basic = false, multiline = false, raw = false;
  if (rest.starts_with("\"\"\""))
    basic = multiline = true;
  else if (rest.starts_with("'''"))
    multiline = true;
  else if (rest.starts_with("\""))
    basic = true;
  else if (!rest.starts_with("'"))
    raw = true;
  if (!raw) b += multiline ? 3 : 1;
  // A newline right after the opening delimiter is not part of a multi-line string.
  if (multiline && b == lines[line].size() && line + 1 < lines.size()) {
    ++line;
    b = 0;
  }

  std::uint32_t decoded = 0;
  while (decoded < offset) {
    std::string_view text = lines[line];
    if (b >= text.size()) {
      if (!multiline || line + 1 >= lines.size()) break;
      ++line; // the newline decodes to one byte
      b = 0;
      ++decoded;
      continue;
    }
    if (basic && multiline && text[b] == '\\' && only_blanks(text.substr(b + 1))) {
      // A line-ending backslash swallows the newline and the blanks that follow it.
      ++line;
      while (line < lines.size()) {
        std::size_t k = lines[line].find_first_not_of(" \t");
        if (k != std::string_view::npos) {
          b = k;
          break;
        }
        ++line;
      }
      if (line >= lines.size()) return start;
      continue;
    }
    if (basic && text[b] == '\\' && b + 1 < text.size()) {
      char e = text[b + 1];
      std::size_t raw_length = 2, out = 1;
      if (e == 'u' || e == 'U') {
        std::size_t digits = e == 'u' ? 4 : 8;
        raw_length = 2 + digits;
        out = utf8_length(parse_hex(text.substr(b + 2, digits)));
      }
      if (decoded + out > offset) break;
      decoded += static_cast<std::uint32_t>(out);
      b += raw_length;
      continue;
    }
    ++b;
    ++decoded;
  }
  return SourcePos{start.file, static_cast<std::uint32_t>(line + 1),
                   column_of_byte(lines[line], b)};
}

} // namespace streamctl::pipeline
