#include "cli/context.hpp"

#include "cli/json_log_line.hpp"

#include <cstdlib>
#include <mutex>
#include <string_view>

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace streamctl::cli {

namespace {

// One JSON object per log line on stderr, for --log-format json.
// Locked (std::mutex): a worker logs from its beacon and ZAP threads too, and is renamed while
// they run.
class JsonStderrSink final : public spdlog::sinks::base_sink<std::mutex> {
public:
  // Written as "logger" instead of the logger's own name (spdlog names are fixed).
  void rename(std::string name) {
    std::lock_guard<std::mutex> lock(mutex_);
    name_ = std::move(name);
  }

protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(msg.time.time_since_epoch());
    auto level = spdlog::level::to_string_view(msg.level);
    std::string_view logger = name_.empty() ? std::string_view(msg.logger_name.data(), msg.logger_name.size())
                                            : std::string_view(name_);
    std::string line = json_log_line(ms.count(), std::string_view(level.data(), level.size()), logger,
                                     std::string_view(msg.payload.data(), msg.payload.size()));
    std::fwrite(line.data(), 1, line.size(), stderr);
  }
  void flush_() override { std::fflush(stderr); }

private:
  std::string name_;
};

// ISO 8601 in UTC, to the millisecond, so that lines of workers on other hosts and in other
// time zones sort together; then "who: level: message" as before, which scripts grep.
std::unique_ptr<spdlog::formatter> text_formatter(const std::string& name) {
  std::string escaped; // the name is literal text in the pattern
  for (char c : name) escaped += c == '%' ? std::string("%%") : std::string(1, c);
  return std::make_unique<spdlog::pattern_formatter>("%Y-%m-%dT%H:%M:%S.%eZ " + escaped + ": %l: %v",
                                                     spdlog::pattern_time_type::utc);
}

} // namespace

std::filesystem::path Context::state_dir() const {
  if (!global.state_dir.empty()) return global.state_dir;
  if (const char* dir = std::getenv("STREAMCTL_STATE_DIR"); dir && *dir) return dir;
  if (const char* xdg = std::getenv("XDG_STATE_HOME"); xdg && *xdg) return std::filesystem::path(xdg) / "streamctl";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::filesystem::path(home) / ".local" / "state" / "streamctl";
  return std::filesystem::temp_directory_path() / "streamctl-state";
}

std::shared_ptr<spdlog::logger> Context::make_logger(const std::string& name) const {
  spdlog::sink_ptr sink;
  if (global.log_format == "json") {
    sink = std::make_shared<JsonStderrSink>();
  } else {
    sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    sink->set_formatter(text_formatter(name));
  }
  auto logger = std::make_shared<spdlog::logger>(name, sink);
  // Quiet by default, as a Unix filter should be: warnings and errors only.
  spdlog::level::level_enum level = spdlog::level::warn;
  if (global.quiet) level = spdlog::level::err;
  else if (global.verbosity == 1) level = spdlog::level::info;
  else if (global.verbosity == 2) level = spdlog::level::debug;
  else if (global.verbosity >= 3) level = spdlog::level::trace;
  logger->set_level(level);
  logger->flush_on(spdlog::level::trace);
  return logger;
}

void Context::configure_logging(const std::string& name) { log = make_logger(name); }

void Context::rename_logger(const std::string& name) {
  if (log) rename(*log, name);
}

void Context::rename(spdlog::logger& logger, const std::string& name) {
  for (auto& sink : logger.sinks()) {
    if (auto* json = dynamic_cast<JsonStderrSink*>(sink.get())) json->rename(name);
    else sink->set_formatter(text_formatter(name));
  }
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
