#pragma once
// What every subcommand shares: the global flags (SPEC §2), the logger they configure, and the
// registry of node types. Built in main and passed down; nothing here is global state.

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <spdlog/logger.h>

#include "operators/registry.hpp"

namespace CLI {
class App;
}

namespace streamctl::cli {

struct GlobalOptions {
  std::string state_dir;   // --state-dir; empty: from the environment
  int verbosity = 0;       // -v, repeatable
  bool quiet = false;      // -q
  std::string log_format = "text";
};

struct Context {
  GlobalOptions global;
  operators::Registry registry;
  std::shared_ptr<spdlog::logger> log;
  int exit_code = 0;

  // $STREAMCTL_STATE_DIR, else $XDG_STATE_HOME/streamctl, else ~/.local/state/streamctl.
  std::filesystem::path state_dir() const;
  // Builds `log` from the global flags; `name` prefixes each line ("streamctl", "worker 3").
  void configure_logging(const std::string& name);
  // A logger like `log`, of its own: each task of a worker process names its lines.
  std::shared_ptr<spdlog::logger> make_logger(const std::string& name) const;
  // Gives `log` another name in the lines it writes from now on (a worker: "ok -> slim[2]"
  // once it knows its nodes). Safe while other threads log: the sinks are locked.
  void rename_logger(const std::string& name);
  static void rename(spdlog::logger& logger, const std::string& name);
  // The flags that give a worker the same logging.
  std::vector<std::string> worker_log_flags() const;
};

// Each subcommand registers itself and sets ctx.exit_code when it runs.
void add_validate_command(CLI::App& app, Context& ctx);
void add_graph_command(CLI::App& app, Context& ctx);
void add_run_command(CLI::App& app, Context& ctx);
void add_test_command(CLI::App& app, Context& ctx);
void add_worker_command(CLI::App& app, Context& ctx);
void add_probe_command(CLI::App& app, Context& ctx); // hidden, run by launchers on each host
void add_list_command(CLI::App& app, Context& ctx);
void add_prune_command(CLI::App& app, Context& ctx); // prune_command.cpp
void add_status_command(CLI::App& app, Context& ctx);
void add_stop_command(CLI::App& app, Context& ctx);   // stop_command.cpp
void add_cancel_command(CLI::App& app, Context& ctx); // stop_command.cpp
void add_savepoint_command(CLI::App& app, Context& ctx);
// Savepoint of a running job (and stop after it): prints the path; the exit code.
int take_savepoint(Context& ctx, const std::string& job, const std::string& dir, bool stop);
void add_restart_command(CLI::App& app, Context& ctx);
void add_rescale_command(CLI::App& app, Context& ctx);
void add_top_command(CLI::App& app, Context& ctx);
void add_tap_command(CLI::App& app, Context& ctx);
// `help [COMMAND...]`: the --help of a command; of streamctl without one.
void add_help_command(CLI::App& app, Context& ctx);
// `completion bash|zsh|fish`: a script from every command of `app`, walked when it runs.
void add_completion_command(CLI::App& app, Context& ctx);

} // namespace streamctl::cli
