#pragma once
// Errors that end a command, on stderr in the format the user asked for (--log-format): in
// text "streamctl run: error: message", in json one object a line as the logger writes them
// (json_log_line.hpp), also when the error comes before any logger exists.

#include <string>

namespace CLI {
class App;
}

namespace streamctl::cli {

struct Context;

// Whether json was asked for: from the parsed flags, or, when the parse stopped before it
// stored them, from what it read of --log-format.
bool json_requested(const CLI::App& root, const Context& ctx);

// "COMMAND: LABEL: MESSAGE" in text; {"level":"error","logger":COMMAND,"msg":...} in json,
// with "LABEL: " before the message when the label is not "error".
void print_error(bool json, const std::string& command, const std::string& message,
                 const std::string& label = "error");

// Text printed as it is ("FILE:LINE:COL: message" lines that editors read), or in json one
// object per line.
void print_error_lines(bool json, const std::string& command, const std::string& text);

} // namespace streamctl::cli
