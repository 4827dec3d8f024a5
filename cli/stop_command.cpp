#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/context.hpp"
#include "pipeline/runtime/job_client.hpp"
#include "pipeline/runtime/job_directory.hpp"

namespace streamctl::cli {

namespace {
// `stop` and `cancel` return when the job's coordinator has exited, so that the next command
// (`run --from-savepoint`, `run --resume`) finds the job's lock free and its job.json final.
// The savepoint is safe before that; a coordinator that takes longer than this to halt its
// workers is reported and left to finish.
void wait_for_job_exit(Context& ctx, const runtime::JobEntry& entry) {
  constexpr auto kExitWait = std::chrono::seconds(30);
  if (!runtime::wait_for_exit(entry.coordinator_pid, kExitWait))
    ctx.log->warn("job {}: its coordinator (pid {}) has not exited {} s after the request; it is still halting its workers",
                  entry.id, entry.coordinator_pid, kExitWait.count());
}
} // namespace

// `stop` takes a savepoint and then halts the job: open windows and source offsets wait in
// the savepoint for `run --from-savepoint` or `--resume` (Flink's stop-with-savepoint).
// `--drain` instead ends the input as if it were exhausted: every window fires, sinks commit,
// no savepoint (as SIGINT to `run` does).
void add_stop_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("stop", "Stop a running job gracefully: a savepoint, then stop; print its path");
  auto job = std::make_shared<std::string>();
  auto drain = std::make_shared<bool>(false);
  auto dir = std::make_shared<std::string>();
  cmd->add_option("JOB", *job, "a job id, or a job name (its running job, else the newest)")->required()->type_name("");
  cmd->add_option("--savepoint-dir", *dir, "write the savepoint under this directory (default: the job's checkpoint directory)")
      ->type_name("DIR");
  cmd->add_flag("--drain", *drain, "no savepoint: end the input, let every window fire, commit everything");
  cmd->callback([&ctx, job, drain, dir] {
    ctx.configure_logging("streamctl");
    if (*drain && !dir->empty()) throw Error(ErrorKind::Usage, "--drain takes no savepoint: drop --savepoint-dir");
    if (!*drain) {
      runtime::JobEntry entry = runtime::find_job(ctx.state_dir(), *job);
      ctx.exit_code = take_savepoint(ctx, entry.id, *dir, true);
      if (ctx.exit_code == 0) wait_for_job_exit(ctx, entry);
      return;
    }
    runtime::JobEntry entry = runtime::find_job(ctx.state_dir(), *job);
    runtime::ask_job(entry, transport::ControlMessage{"STOP_JOB", {}}.set("drain", "1"));
    if (!ctx.global.quiet) std::cerr << "streamctl: draining job " << entry.id << "\n";
    ctx.exit_code = 0;
  });
}

void add_cancel_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("cancel", "Stop a running job at once: nothing more is committed");
  auto job = std::make_shared<std::string>();
  cmd->add_option("JOB", *job, "a job id, or a job name (its running job, else the newest)")->required()->type_name("");
  cmd->callback([&ctx, job] {
    ctx.configure_logging("streamctl");
    runtime::JobEntry entry = runtime::find_job(ctx.state_dir(), *job);
    runtime::ask_job(entry, transport::ControlMessage{"CANCEL_JOB", {}});
    wait_for_job_exit(ctx, entry);
    if (!ctx.global.quiet) std::cerr << "streamctl: cancelled job " << entry.id << "\n";
    ctx.exit_code = 0;
  });
}

} // namespace streamctl::cli
