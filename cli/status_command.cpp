#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/context.hpp"
#include "cli/job_status_query.hpp"
#include "cli/status_view.hpp"
#include "pipeline/runtime/job_directory.hpp"
#include "state/error.hpp"

namespace streamctl::cli {

void add_status_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("status", "Show a job's state and, while it runs, each operator subtask");
  auto job = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  cmd->add_option("JOB", *job, "a job id, or a job name (its running job, else the newest)")->required()->type_name("");
  cmd->add_flag("--json", *json, "print one JSON object: id, name, state, started, last_checkpoint, operators");
  cmd->callback([&ctx, job, json] {
    ctx.configure_logging("streamctl");
    runtime::JobEntry entry = runtime::find_job(ctx.state_dir(), *job);
    std::string status = job_status_json(entry);
    if (*json) {
      std::cout << status << "\n";
      ctx.exit_code = 0;
      return;
    }
    auto view = parse_status_view(status);
    if (!view) throw Error(ErrorKind::Internal, "job " + entry.id + ": " + view.error());
    std::cout << format_status(*view, entry.lost ? " (its coordinator is gone)" : "");
    if (entry.state != "running")
      for (const auto& t : entry.tasks) {
        // A worker that has exited shows no pid: the number may name another process now.
        if (runtime::process_alive(t.pid)) std::cout << "  " << t.task << ": pid " << t.pid << " on " << t.host << "\n";
        else std::cout << "  " << t.task << ": exited\n";
      }
    ctx.exit_code = 0;
  });
}

} // namespace streamctl::cli
