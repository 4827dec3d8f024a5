#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>

#include "cli/context.hpp"
#include "pipeline/runtime/job_client.hpp"
#include "pipeline/runtime/job_directory.hpp"
#include "state/error.hpp"

namespace streamctl::cli {

namespace {
// A savepoint takes as long as the job's state takes to write; the coordinator gives up on
// it after [checkpoint] timeout and says so, so this only guards against a hung coordinator.
constexpr auto kSavepointWait = std::chrono::minutes(30);
// `savepoint delete PATH`: a savepoint is kept until a person deletes it (no job does), so
// this is how. Only a savepoint directory: named savepoint-* (a chk-N belongs to its job's
// retention) and holding _metadata (what makes it a snapshot), so a typo cannot remove_all
// something else.
CLI::App* add_delete_command(CLI::App& savepoint, Context& ctx) {
  auto* cmd = savepoint.add_subcommand("delete", "Delete a savepoint directory (savepoint-*, with a _metadata)");
  auto path = std::make_shared<std::string>();
  cmd->add_option("PATH", *path, "the savepoint directory, as savepoint or stop printed it")->required()->type_name("");
  cmd->callback([&ctx, path] {
    ctx.configure_logging("streamctl");
    const std::filesystem::path dir = std::filesystem::path(*path).lexically_normal();
    const std::string name = (dir.has_filename() ? dir : dir.parent_path()).filename().string();
    std::error_code ec;
    if (!name.starts_with("savepoint-") || !std::filesystem::is_directory(dir, ec) ||
        !std::filesystem::is_regular_file(dir / "_metadata", ec))
      throw Error(ErrorKind::Usage, "'" + *path + "' is not a savepoint directory (savepoint-* with a _metadata file); nothing deleted");
    std::filesystem::remove_all(dir, ec);
    if (ec) throw Error(ErrorKind::Internal, "cannot delete '" + *path + "': " + ec.message());
    if (!ctx.global.quiet) std::cerr << "streamctl: deleted savepoint " << *path << "\n";
    ctx.exit_code = 0;
  });
  return cmd;
}

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
  // Not ->required(): `savepoint delete PATH` has no JOB; the callback asks for it otherwise.
  cmd->add_option("JOB", *job, "a job id, or a job name (its running job, else the newest)")->type_name("");
  cmd->add_option("--dir", *dir,
                  "write the savepoint under DIR (default: the job's checkpoint directory), as DIR/savepoint-TIME-N")
      ->type_name("DIR");
  auto* remove = add_delete_command(*cmd, ctx);
  cmd->callback([&ctx, job, dir, cmd, remove] {
    if (cmd->got_subcommand(remove)) return;
    ctx.configure_logging("streamctl");
    if (job->empty()) throw Error(ErrorKind::Usage, "savepoint: give the JOB to savepoint (streamctl list shows them)");
    ctx.exit_code = take_savepoint(ctx, *job, *dir, false);
  });
}

} // namespace streamctl::cli
