#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/context.hpp"
#include "pipeline/runtime/job_client.hpp"
#include "pipeline/runtime/job_directory.hpp"

namespace streamctl::cli {

// `stop` drains (as SIGINT to `run` does): sources end, windows fire, sinks commit. Savepoints
// on stop come with checkpoints (issue 4); until then --drain is what stop always does.
void add_stop_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("stop", "Stop a running job gracefully: sources end, sinks commit");
  auto job = std::make_shared<std::string>();
  auto drain = std::make_shared<bool>(false);
  cmd->add_option("JOB", *job, "a job id, or a job name that one job has")->required();
  cmd->add_flag("--drain", *drain, "end the input and let every window fire (the only way for now)");
  cmd->callback([&ctx, job] {
    ctx.configure_logging("streamctl");
    runtime::JobEntry entry = runtime::find_job(ctx.state_dir(), *job);
    runtime::ask_job(entry, transport::ControlMessage{"STOP_JOB", {}});
    if (!ctx.global.quiet) std::cerr << "streamctl: stopping job " << entry.id << "\n";
    ctx.exit_code = 0;
  });
}

void add_cancel_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("cancel", "Stop a running job at once: nothing more is committed");
  auto job = std::make_shared<std::string>();
  cmd->add_option("JOB", *job, "a job id, or a job name that one job has")->required();
  cmd->callback([&ctx, job] {
    ctx.configure_logging("streamctl");
    runtime::JobEntry entry = runtime::find_job(ctx.state_dir(), *job);
    runtime::ask_job(entry, transport::ControlMessage{"CANCEL_JOB", {}});
    if (!ctx.global.quiet) std::cerr << "streamctl: cancelled job " << entry.id << "\n";
    ctx.exit_code = 0;
  });
}

} // namespace streamctl::cli
