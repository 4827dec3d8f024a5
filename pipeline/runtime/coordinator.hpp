#pragma once
// The coordinator: what `streamctl run` becomes once the job is planned. It registers the job
// under the state dir, starts one worker process per task, tells each where its peers are,
// watches them (control messages, heartbeats, SIGCHLD), takes checkpoints (SPEC §7: triggers
// the sources, collects every task's acknowledgement, writes _metadata last, lets the sinks
// commit), restarts the job from its latest checkpoint when a worker dies, per [restart], and
// ends the job: finished when every task has finished, failed when one fails and restarts
// are used up, stopped (with a savepoint, or drained) or cancelled.

#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include <spdlog/logger.h>

#include "pipeline/runtime/checkpoint_dir_lock.hpp"
#include "pipeline/runtime/job_loader.hpp"
#include "pipeline/spec/worker_limits.hpp"

namespace streamctl::runtime {

struct RunOptions {
  std::filesystem::path state_dir;
  std::string self_executable;      // the streamctl binary, for `streamctl worker`
  std::string transport = "ipc";    // data channels: "ipc" or "tcp"
  std::vector<std::string> worker_log_flags; // -v, --log-format ... passed on to workers
  // Called once the job is registered (its id and directory exist), before any worker
  // starts: `run --detach` moves its output into the job directory and lets its parent go.
  std::function<void(const std::string& job_id, const std::filesystem::path& job_dir)> on_registered;
  // A checkpoint or savepoint directory to start from (--from-savepoint, --resume).
  std::filesystem::path restore;
  bool allow_non_restored_state = false;
  // At the end of bounded input, take a savepoint instead of draining (--savepoint-on-exit).
  bool savepoint_on_exit = false;
  // The lock of the job's checkpoint directory, taken by `run --resume` or
  // `--savepoint-on-exit` before it chose what to resume from, so that no other run changes the
  // directory in between; the job holds it to its end. Null: the job takes the lock itself if
  // it has periodic checkpoints.
  std::shared_ptr<CheckpointDirLock> dir_lock;
  // The worker limits the job was run with (--max-workers, --max-host-workers): a rescale
  // beyond them is refused; run_options keeps them for `restart JOB`.
  pipeline::WorkerLimits worker_limits;
  // `streamctl restart JOB`: run under that job's id (its directory exists) instead of a new one.
  std::string reuse_job_id;
  // Every worker on this host whatever [cluster] says (`streamctl test`).
  bool ignore_cluster = false;
  // No Prometheus endpoint whatever [metrics] listen says (`streamctl test` runs many jobs).
  bool ignore_metrics_listen = false;
};

struct RunOutcome {
  int exit_code = 0; // SPEC §2: 0, 1 failed, 130 SIGINT, 143 SIGTERM
  std::string job_id;
  std::string error; // why the job failed, when it did
  std::filesystem::path savepoint; // the savepoint the job ended with, if it did
  // What the end of a finished run warned of (shedding, nodes that passed on nothing, fields
  // no record had), as logged: for `validate --sample`, which prints them as lint warnings.
  std::vector<std::string> warnings;
};

// Throws Error(Snapshot) when options.restore cannot be read or does not fit the pipeline,
// Error(Usage) when the checkpoint directory cannot be written: nothing is started then.
RunOutcome run_job(const LoadedJob& job, const RunOptions& options, spdlog::logger& log);

} // namespace streamctl::runtime
