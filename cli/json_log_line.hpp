#pragma once
// One log line of --log-format json: {"ts":MS,"level":"...","logger":"...","msg":"..."} and a
// newline. Shared by the logger's sink and by errors printed before a logger exists, so that a
// log collector reading stderr sees one shape.

#include <cstdint>
#include <string>
#include <string_view>

namespace streamctl::cli {

// `ts_ms`: milliseconds since the epoch.
std::string json_log_line(std::int64_t ts_ms, std::string_view level, std::string_view logger,
                          std::string_view msg);

// The same, stamped now.
std::string json_log_line_now(std::string_view level, std::string_view logger,
                              std::string_view msg);

} // namespace streamctl::cli
