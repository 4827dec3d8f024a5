#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/context.hpp"
#include "pipeline/runtime/host_probe.hpp"

namespace streamctl::cli {

void add_probe_command(CLI::App& app, Context& ctx) {
  // Run by a launcher on each host before a job starts (host_probe.hpp), never by hand:
  // hidden from --help (an empty group).
  auto* cmd =
      app.add_subcommand("probe", "Report this host's streamctl version, protocol and cores");
  cmd->group("");
  cmd->callback([&ctx] {
    std::cout << runtime::format_probe(runtime::probe_this_host()) << std::flush;
    ctx.exit_code = std::cout ? 0 : 1;
  });
}

} // namespace streamctl::cli
