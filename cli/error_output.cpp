#include "cli/error_output.hpp"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <sstream>

#include "cli/context.hpp"
#include "cli/json_log_line.hpp"

namespace streamctl::cli {

namespace {

void write_stderr(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
}

} // namespace

bool json_requested(const CLI::App& root, const Context& ctx) {
  if (ctx.global.log_format == "json") return true;
  const CLI::Option* opt = root.get_option_no_throw("--log-format");
  return opt != nullptr && !opt->results().empty() && opt->results().back() == "json";
}

void print_error(bool json, const std::string& command, const std::string& message,
                 const std::string& label) {
  if (json)
    write_stderr(
        json_log_line_now("error", command, label == "error" ? message : label + ": " + message));
  else
    write_stderr(command + ": " + label + ": " + message + "\n");
}

void print_error_lines(bool json, const std::string& command, const std::string& text) {
  if (!json) {
    write_stderr(text + "\n");
    return;
  }
  std::istringstream lines(text);
  std::string out;
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) out += json_log_line_now("error", command, line);
  write_stderr(out);
}

} // namespace streamctl::cli
