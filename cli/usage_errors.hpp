#pragma once
// What a command line that CLI11 refused says to the user, in words: an unknown command or
// option with the closest valid one (the rule of the pipeline checker, did_you_mean.hpp), a
// value out of range as "--parallelism must be at least 1", a missing argument by its name.
// Always a usage error: exit 2 (SPEC §2).

#include <string>

namespace CLI {
class App;
class ParseError;
} // namespace CLI

namespace streamctl::cli {

struct UsageError {
  std::string command; // "streamctl run": the command the error is about
  std::string message; // "unknown option '--paralelism'; did you mean '--parallelism'?"

  // "streamctl run: error: unknown option ...", as printed in text.
  std::string text() const;
};

// Explains `e`, thrown by `root.parse`; reads what the parse left in `root` (the commands it
// found, the arguments it could not place).
UsageError explain_parse_error(const CLI::App& root, const CLI::ParseError& e);

// "streamctl snapshot inspect": the names from the root to `app`.
std::string command_path(const CLI::App& app);

// "unknown command 'rnu'; did you mean 'run'?" for a word that names no command of `parent`.
std::string unknown_command(const CLI::App& parent, const std::string& word);

} // namespace streamctl::cli
