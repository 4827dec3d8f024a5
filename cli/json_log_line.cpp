#include "cli/json_log_line.hpp"

#include <chrono>
#include <cstdio>

namespace streamctl::cli {

namespace {

void append_escaped(std::string& out, std::string_view text) {
  for (char c : text) {
    switch (c) {
    case '"': out += "\\\""; break;
    case '\\': out += "\\\\"; break;
    case '\n': out += "\\n"; break;
    case '\t': out += "\\t"; break;
    default:
      if (static_cast<unsigned char>(c) < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out += buf;
      } else {
        out += c;
      }
    }
  }
}

} // namespace

std::string json_log_line(std::int64_t ts_ms, std::string_view level, std::string_view logger,
                          std::string_view msg) {
  std::string line = "{\"ts\":" + std::to_string(ts_ms) + ",\"level\":\"";
  append_escaped(line, level);
  line += "\",\"logger\":\"";
  append_escaped(line, logger);
  line += "\",\"msg\":\"";
  append_escaped(line, msg);
  line += "\"}\n";
  return line;
}

std::string json_log_line_now(std::string_view level, std::string_view logger,
                              std::string_view msg) {
  auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::system_clock::now().time_since_epoch());
  return json_log_line(now.count(), level, logger, msg);
}

} // namespace streamctl::cli
