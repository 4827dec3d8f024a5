#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/context.hpp"
#include "pipeline/runtime/job_client.hpp"
#include "pipeline/runtime/job_directory.hpp"

namespace streamctl::cli {

namespace {
// A savepoint takes as long as the job's state takes to write; the coordinator gives up on
// it after [checkpoint] timeout and says so, so this only guards against a hung coordinator.
constexpr auto kSavepointWait = std::chrono::minutes(30);
} // namespace

// Asks the coordinator of `job` for a savepoint (and to stop after it, for `stop`); prints
// its path on stdout. Exit 1 when the savepoint failed, the job going on.
int take_savepoint(Context& ctx, const std::string& job, const std::string& dir, bool stop) {
  runtime::JobEntry entry = runtime::find_job(ctx.state_dir(), job);
  transport::ControlMessage request{stop ? "STOP_JOB" : "SAVEPOINT", {}};
  if (!dir.empty()) request.set("dir", std::filesystem::absolute(dir).string());
  if (!ctx.global.quiet)
    std::cerr << "streamctl: taking a savepoint of job " << entry.id << (stop ? ", then stopping it" : "") << "\n";
  auto reply = runtime::ask_job(entry, request, kSavepointWait);
  if (reply.type != "OK") {
    ctx.log->error("job {}: {}", entry.id, reply.get("message"));
    return 1;
  }
  std::cout << reply.get("path") << "\n";
  return 0;
}

void add_savepoint_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("savepoint", "Take a savepoint of a running job; print its path");
  auto job = std::make_shared<std::string>();
  auto dir = std::make_shared<std::string>();
  cmd->add_option("JOB", *job, "a job id, or a job name (its running job, else the newest)")->required()->type_name("");
  cmd->add_option("--dir", *dir,
                  "write the savepoint under DIR (default: the job's checkpoint directory), as DIR/savepoint-TIME-N")
      ->type_name("DIR");
  cmd->callback([&ctx, job, dir] {
    ctx.configure_logging("streamctl");
    ctx.exit_code = take_savepoint(ctx, *job, *dir, false);
  });
}

} // namespace streamctl::cli
