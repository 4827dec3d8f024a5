#pragma once
// The worker process (`streamctl worker`, hidden): runs one task of a job, told by the
// coordinator where its peers are, until its input ends, it is stopped or cancelled, or it
// fails.

#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include <spdlog/logger.h>

#include "pipeline/runtime/worker_bootstrap.hpp"

namespace streamctl::runtime {

struct WorkerOptions {
  std::filesystem::path job_dir;  // holds pipeline.toml
  std::filesystem::path base_dir; // the pipeline file's directory
  std::string file_name;          // the pipeline file as the user named it, for messages
  std::filesystem::path socket_dir; // where ipc:// endpoints live
  int task = 0;
  std::string coordinator;        // the coordinator's control endpoint
  std::string transport = "ipc";  // "ipc" or "tcp" for data channels
  int attempt = 0;                // which start of the job this is (0, then one per restart)
  std::filesystem::path restore;   // a checkpoint or savepoint to start from; empty: fresh
  std::filesystem::path spool_dir; // where stdin is spooled; empty: the job takes no checkpoints
  std::string run_tag;             // names the run in spool files (the job id)
  // What the coordinator sent on the bootstrap channel (--bootstrap-fd): the pipeline and the
  // overrides come from it rather than from job_dir's files. Empty: a local worker of a
  // coordinator that wrote them there.
  std::optional<WorkerBootstrap> bootstrap;
  // Called once, from the liveness beacon's thread, when the coordinator stopped answering
  // for the bootstrap's heartbeat timeout; it is expected not to return (the caller ends the
  // process: nobody is left to tell).
  std::function<void(const std::string& why)> on_coordinator_lost;
  // Called once, from the worker's thread, as soon as the task knows the nodes it runs, with
  // their label ("ok -> slim[2]"): for the caller to name its log lines after them rather than
  // after the task's index. Empty: nothing to do.
  std::function<void(const std::string& label)> on_label;
};

// Returns the process exit code: 0 finished (or halted after a savepoint), 1 failed (FAILED
// sent), 2 cancelled.
int run_worker(const WorkerOptions& options, spdlog::logger& log);

} // namespace streamctl::runtime
