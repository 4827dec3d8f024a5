#include "transport/control.hpp"

#include <charconv>
#include <cstdint>

namespace streamctl::transport {

const std::string& ControlMessage::get(const std::string& key) const {
  static const std::string empty;
  auto it = fields.find(key);
  return it == fields.end() ? empty : it->second;
}

std::int64_t ControlMessage::get_int(const std::string& key, std::int64_t fallback) const {
  const std::string& text = get(key);
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return fallback;
  return v;
}

std::string encode_control(const ControlMessage& message) {
  std::string out = message.type;
  out += '\n';
  for (const auto& [key, value] : message.fields) {
    out += key;
    out += '=';
    for (char c : value) {
      if (c == '\\') out += "\\\\";
      else if (c == '\n') out += "\\n";
      else out += c;
    }
    out += '\n';
  }
  return out;
}

std::optional<ControlMessage> decode_control(std::string_view text) {
  ControlMessage m;
  std::size_t eol = text.find('\n');
  if (eol == std::string_view::npos || eol == 0) return std::nullopt;
  m.type = std::string(text.substr(0, eol));
  text.remove_prefix(eol + 1);
  while (!text.empty()) {
    eol = text.find('\n');
    if (eol == std::string_view::npos) return std::nullopt;
    std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol + 1);
    std::size_t eq = line.find('=');
    if (eq == std::string_view::npos) return std::nullopt;
    std::string value;
    for (std::size_t k = eq + 1; k < line.size(); ++k) {
      if (line[k] == '\\' && k + 1 < line.size()) {
        ++k;
        value += line[k] == 'n' ? '\n' : line[k];
      } else {
        value += line[k];
      }
    }
    m.fields[std::string(line.substr(0, eq))] = std::move(value);
  }
  return m;
}

} // namespace streamctl::transport
