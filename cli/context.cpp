#include "cli/context.hpp"

#include <cstdlib>
#include <string_view>

#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace streamctl::cli {

namespace {

// One JSON object per log line on stderr, for --log-format json.
class JsonStderrSink final : public spdlog::sinks::base_sink<spdlog::details::null_mutex> {
protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    std::string line = "{\"ts\":" + std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                       msg.time.time_since_epoch())
                                                       .count()) +
                       ",\"level\":\"" + std::string(spdlog::level::to_string_view(msg.level).data()) +
                       "\",\"logger\":\"" + std::string(msg.logger_name.data(), msg.logger_name.size()) +
                       "\",\"msg\":\"";
    for (char c : std::string_view(msg.payload.data(), msg.payload.size())) {
      switch (c) {
      case '"': line += "\\\""; break;
      case '\\': line += "\\\\"; break;
      case '\n': line += "\\n"; break;
      case '\t': line += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          line += buf;
        } else {
          line += c;
        }
      }
    }
    line += "\"}\n";
    std::fwrite(line.data(), 1, line.size(), stderr);
  }
  void flush_() override { std::fflush(stderr); }
};

} // namespace

std::filesystem::path Context::state_dir() const {
  if (!global.state_dir.empty()) return global.state_dir;
  if (const char* dir = std::getenv("STREAMCTL_STATE_DIR"); dir && *dir) return dir;
  if (const char* xdg = std::getenv("XDG_STATE_HOME"); xdg && *xdg) return std::filesystem::path(xdg) / "streamctl";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::filesystem::path(home) / ".local" / "state" / "streamctl";
  return std::filesystem::temp_directory_path() / "streamctl-state";
}

void Context::configure_logging(const std::string& name) {
  spdlog::sink_ptr sink;
  if (global.log_format == "json") {
    sink = std::make_shared<JsonStderrSink>();
  } else {
    sink = std::make_shared<spdlog::sinks::stderr_sink_st>();
    sink->set_pattern("%n: %l: %v");
  }
  log = std::make_shared<spdlog::logger>(name, sink);
  // Quiet by default, as a Unix filter should be: warnings and errors only.
  spdlog::level::level_enum level = spdlog::level::warn;
  if (global.quiet) level = spdlog::level::err;
  else if (global.verbosity == 1) level = spdlog::level::info;
  else if (global.verbosity == 2) level = spdlog::level::debug;
  else if (global.verbosity >= 3) level = spdlog::level::trace;
  log->set_level(level);
  log->flush_on(spdlog::level::trace);
}

std::vector<std::string> Context::worker_log_flags() const {
  std::vector<std::string> flags;
  for (int k = 0; k < global.verbosity; ++k) flags.push_back("-v");
  if (global.quiet) flags.push_back("-q");
  flags.push_back("--log-format");
  flags.push_back(global.log_format);
  return flags;
}

} // namespace streamctl::cli
