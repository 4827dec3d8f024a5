#pragma once
// The coordinator: what `streamctl run` becomes once the job is planned. It registers the job
// under the state dir, starts one worker process per task, tells each where its peers are,
// watches them (control messages, SIGCHLD), and ends the job: finished when every task has
// finished, failed when one fails or dies, stopped or cancelled on SIGINT/SIGTERM.

#include <filesystem>
#include <functional>
#include <string>

#include <spdlog/logger.h>

#include "pipeline/runtime/job_loader.hpp"

namespace streamctl::runtime {

struct RunOptions {
  std::filesystem::path state_dir;
  std::string self_executable;      // the streamctl binary, for `streamctl worker`
  std::string transport = "ipc";    // data channels: "ipc" or "tcp"
  std::vector<std::string> worker_log_flags; // -v, --log-format ... passed on to workers
  // Called once the job is registered (its id and directory exist), before any worker
  // starts: `run --detach` moves its output into the job directory and lets its parent go.
  std::function<void(const std::string& job_id, const std::filesystem::path& job_dir)> on_registered;
};

struct RunOutcome {
  int exit_code = 0; // SPEC §2: 0, 1 failed, 130 SIGINT, 143 SIGTERM
  std::string job_id;
  std::string error; // why the job failed, when it did
};

RunOutcome run_job(const LoadedJob& job, const RunOptions& options, spdlog::logger& log);

} // namespace streamctl::runtime
