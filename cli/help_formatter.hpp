#pragma once
// --help of every command lists the global options too (SPEC §2: they may come before or after
// the command), so that `streamctl run --help` shows all that `run` accepts.

#include <memory>

#include <CLI/FormatterFwd.hpp>

namespace streamctl::cli {

// Set on the top-level app before commands are added: CLI11 copies it to each.
std::shared_ptr<CLI::Formatter> make_help_formatter();

} // namespace streamctl::cli
