// streamctl: one binary for every role — the commands users type, and the hidden `worker`
// that the coordinator starts for each task.

#include <CLI/CLI.hpp>
#include <csignal>
#include <malloc.h>
#include <iostream>

#include "cli/context.hpp"
#include "cli/error_output.hpp"
#include "cli/help_formatter.hpp"
#include "cli/usage_errors.hpp"
#include "cli/snapshot_command.hpp"
#include "cli/value_checks.hpp"
#include "operators/connectors/registry.hpp"
#include "state/error.hpp"

#ifndef STREAMCTL_VERSION
#define STREAMCTL_VERSION "0.0.0"
#endif

int main(int argc, char** argv) {
  using namespace streamctl;
  // A closed stdout (`streamctl run ... | head`) is an error to report, not a silent death.
  std::signal(SIGPIPE, SIG_IGN);
  // Batches come and go by the thousand a second, each with a few hundred KiB of arena. By
  // default glibc returns freed memory to the kernel and the next batch faults it in again
  // (measured: decoding ran 10-20x slower); keep up to 64 MiB in the process instead.
  ::mallopt(M_TRIM_THRESHOLD, 64 << 20);
  ::mallopt(M_MMAP_THRESHOLD, 64 << 20);

  cli::Context ctx;
  connectors::register_all_types(ctx.registry);

  // Named, not argv[0]: usage lines read "streamctl run ...", wherever the binary is.
  CLI::App app{"streamctl - a stream processor: TOML pipelines of sources, operators and sinks,\n"
               "run as worker processes linked by ZeroMQ. See streamctl(1).",
               "streamctl"};
  app.formatter(cli::make_help_formatter()); // before the commands: each copies it
  app.set_version_flag("--version", std::string("streamctl ") + STREAMCTL_VERSION);
  app.require_subcommand(1);
  app.fallthrough(); // global flags may come after the command too
  app.add_option("--state-dir", ctx.global.state_dir,
                 "where jobs are registered (default: $STREAMCTL_STATE_DIR, $XDG_STATE_HOME/streamctl or "
                 "~/.local/state/streamctl)")
      ->type_name("DIR");
  app.add_flag("-v,--verbose", ctx.global.verbosity, "more logging on stderr (repeat for more)");
  app.add_flag("-q,--quiet", ctx.global.quiet, "errors only on stderr");
  app.add_option("--log-format", ctx.global.log_format,
                 "log lines on stderr: text (UTC time, who, level, message) or json (one object a line)")
      ->type_name("text|json")
      ->check(cli::one_of({"text", "json"}));

  cli::add_validate_command(app, ctx);
  cli::add_graph_command(app, ctx);
  cli::add_run_command(app, ctx);
  cli::add_test_command(app, ctx);
  cli::add_list_command(app, ctx);
  cli::add_prune_command(app, ctx);
  cli::add_status_command(app, ctx);
  cli::add_top_command(app, ctx);
  cli::add_tap_command(app, ctx);
  cli::add_stop_command(app, ctx);
  cli::add_cancel_command(app, ctx);
  cli::add_savepoint_command(app, ctx);
  cli::add_restart_command(app, ctx);
  cli::add_rescale_command(app, ctx);
  cli::add_snapshot_command(app, ctx);
  cli::add_worker_command(app, ctx);
  cli::add_probe_command(app, ctx);
  cli::add_help_command(app, ctx);
  cli::add_completion_command(app, ctx);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e); // --help, --version: on stdout
    cli::UsageError error = cli::explain_parse_error(app, e);
    cli::print_error(cli::json_requested(app, ctx), error.command, error.message);
    return 2;
  } catch (const Error& e) {
    bool json = cli::json_requested(app, ctx);
    // Pipeline problems are "FILE:LINE:COL: message" lines, printed as they are so that
    // editors and grep can use them.
    if (e.kind() == ErrorKind::Usage) cli::print_error_lines(json, "streamctl", e.what());
    else if (ctx.log) ctx.log->error("{}", e.what());
    else cli::print_error(json, "streamctl", e.what());
    return exit_code_for(e.kind());
  } catch (const std::exception& e) {
    cli::print_error(cli::json_requested(app, ctx), "streamctl", e.what(), "internal error");
    return 1;
  }
  return ctx.exit_code;
}
