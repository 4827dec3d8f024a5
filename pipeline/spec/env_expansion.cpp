#include "pipeline/spec/env_expansion.hpp"

#include <cstdlib>

namespace streamctl::pipeline {

namespace {

bool name_start(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}
bool name_char(char c) {
  return name_start(c) || (c >= '0' && c <= '9');
}

} // namespace

std::optional<std::string> process_environment(const std::string& name) {
  const char* v = std::getenv(name.c_str()); // NOLINT(concurrency-mt-unsafe): read at load
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

StringExpansion expand_string(std::string_view input, const VariableLookup& lookup,
                              PipelineVariables& used) {
  StringExpansion out;
  std::string value;
  std::size_t i = 0;
  while (i < input.size()) {
    if (input.compare(i, 3, "$${") == 0) {
      value += "${";
      i += 3;
      continue;
    }
    if (input.compare(i, 2, "${") != 0) {
      value += input[i++];
      continue;
    }
    std::size_t start = i;
    std::size_t close = input.find('}', i + 2);
    if (close == std::string_view::npos) {
      out.problems.push_back({start, "'${' without a closing '}' (write $${ for a literal ${)"});
      break;
    }
    std::string_view inside = input.substr(i + 2, close - i - 2);
    i = close + 1;
    std::size_t n = 0;
    while (n < inside.size() && name_char(inside[n])) ++n;
    std::string name(inside.substr(0, n));
    std::string_view rest = inside.substr(n);
    bool has_default = rest.rfind(":-", 0) == 0;
    std::string_view fallback = has_default ? rest.substr(2) : std::string_view();
    std::string shown = "'${" + std::string(inside) + "}'";
    if (name.empty()) {
      out.problems.push_back(
          {start, rest.empty() || has_default
                      ? shown + " has no variable name"
                      : shown + ": a variable name is letters, digits and '_', not starting "
                                "with a digit"});
      continue;
    }
    if (!name_start(name[0])) {
      out.problems.push_back({start, shown + ": '" + name +
                                         "' is not a variable name (letters, digits and '_', "
                                         "not starting with a digit)"});
      continue;
    }
    if (!rest.empty() && !has_default) {
      out.problems.push_back({start, shown + ": write ${" + name + "} or ${" + name +
                                         ":-default}, nothing else (a variable name is letters, "
                                         "digits and '_')"});
      continue;
    }
    if (fallback.find("${") != std::string_view::npos) {
      out.problems.push_back(
          {start, "the default of ${" + name + "} holds another '${': defaults are not expanded"});
      continue;
    }
    std::optional<std::string> found = lookup(name);
    if (found) used[name] = *found;
    if (found && (!found->empty() || !has_default)) {
      value += *found;
    } else if (has_default) {
      value += fallback;
    } else {
      out.problems.push_back({start, "environment variable " + name + " is not set (write ${" +
                                         name + ":-default} for a default)"});
    }
  }
  out.value = out.problems.empty() ? std::move(value) : std::string(input);
  return out;
}

namespace {

// Byte offset in `text` of toml++'s (line, column), columns counted in code points as
// toml++ counts them; npos when the text is shorter.
std::size_t offset_of(std::string_view text, std::uint32_t line, std::uint32_t column) {
  std::size_t at = 0;
  for (std::uint32_t l = 1; l < line; ++l) {
    at = text.find('\n', at);
    if (at == std::string_view::npos) return at;
    ++at;
  }
  // One code point per column: its first byte, then its continuation bytes.
  for (std::uint32_t c = 1; c < column && at < text.size() && text[at] != '\n'; ++c) {
    ++at;
    while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) ++at;
  }
  return at;
}

SourcePos position_at(std::string_view text, std::size_t offset, const std::string& file) {
  std::uint32_t line = 1, column = 1;
  for (std::size_t k = 0; k < offset && k < text.size(); ++k) {
    if (text[k] == '\n') {
      ++line;
      column = 1;
    } else if ((static_cast<unsigned char>(text[k]) & 0xC0) != 0x80) {
      ++column;
    }
  }
  return SourcePos{file, line, column};
}

// Where the problem at `offset` of the string `node` stands in `text`: the same "${" (its
// ordinal among the value's "${") in the string's source, else the string's opening quote.
SourcePos locate(const toml::node& node, std::string_view value, std::size_t offset,
                 std::string_view text, const std::string& file) {
  const auto& region = node.source();
  SourcePos quote{file, region.begin.line, region.begin.column};
  std::size_t begin = offset_of(text, region.begin.line, region.begin.column);
  std::size_t end = offset_of(text, region.end.line, region.end.column);
  if (begin == std::string_view::npos) return quote;
  if (end == std::string_view::npos || end <= begin) end = text.size();
  std::size_t ordinal = 0;
  for (std::size_t k = value.find("${"); k < offset; k = value.find("${", k + 2)) ++ordinal;
  std::size_t at = text.find("${", begin);
  for (; at != std::string_view::npos && ordinal > 0; --ordinal) at = text.find("${", at + 2);
  // Beyond the string: its "$" was written as an escape (\u0024).
  if (at == std::string_view::npos || at >= end) return quote;
  return position_at(text, at, file);
}

void expand_node(toml::node& node, std::string_view text, const std::string& file,
                 const VariableLookup& lookup, PipelineVariables& used, Diagnostics& out) {
  if (auto* s = node.as_string()) {
    const std::string& value = s->get();
    if (value.find("${") == std::string::npos) return;
    StringExpansion e = expand_string(value, lookup, used);
    for (const auto& p : e.problems) out.add(locate(node, value, p.offset, text, file), p.message);
    if (e.problems.empty()) *s = std::move(e.value); // keeps the node's source position
  } else if (auto* t = node.as_table()) {
    for (auto&& [key, child] : *t) expand_node(child, text, file, lookup, used, out);
  } else if (auto* a = node.as_array()) {
    for (auto& child : *a) expand_node(child, text, file, lookup, used, out);
  }
}

void escape_node(toml::node& node) {
  if (auto* s = node.as_string()) {
    const std::string& value = s->get();
    if (value.find("${") == std::string::npos) return;
    std::string escaped;
    for (std::size_t i = 0; i < value.size(); ++i) {
      if (value.compare(i, 2, "${") == 0) escaped += '$';
      escaped += value[i];
    }
    *s = std::move(escaped);
  } else if (auto* t = node.as_table()) {
    for (auto&& [key, child] : *t) escape_node(child);
  } else if (auto* a = node.as_array()) {
    for (auto& child : *a) escape_node(child);
  }
}

} // namespace

void escape_variables(toml::table& root) {
  for (auto&& [key, child] : root) escape_node(child);
}

void expand_variables(toml::table& root, std::string_view text, const std::string& file,
                      const VariableLookup& lookup, PipelineVariables& used, Diagnostics& out) {
  for (auto&& [key, child] : root) expand_node(child, text, file, lookup, used, out);
}

} // namespace streamctl::pipeline
