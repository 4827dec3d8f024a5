#pragma once
// The jobs registered under a state dir, as `streamctl list` and the commands that take a JOB
// see them: read from each STATE_DIR/jobs/ID/job.json (written by JobRegistration).

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/runtime/metrics_view.hpp"

namespace streamctl::runtime {

struct JobTaskEntry {
  std::string task; // "clicks -> ok[1]"
  std::string host;
  long pid = 0; // 0: no process (the worker has exited)
};

struct JobEntry {
  std::string id;
  std::string name;
  // As job.json says; a "running" job whose coordinator process is gone (killed) reads as
  // "failed", with `lost` set.
  std::string state;
  bool lost = false;
  std::string started; // RFC 3339, UTC
  std::string updated;
  long coordinator_pid = 0;
  std::string control; // the coordinator's control endpoint
  std::string last_checkpoint;     // the latest completed checkpoint or savepoint, if any
  std::string pipeline_file;       // as the user named it, for messages
  std::filesystem::path base_dir;  // the pipeline file's directory: relative paths resolve there
  std::vector<JobTaskEntry> tasks;
  std::filesystem::path dir;
  // An ended job's: why it failed (job.json), and its operators' last figures as
  // `status --json` shows them (operators.json; empty when the job left none).
  std::optional<FailureCause> failure;
  std::string final_operators;
  // Its end-of-run warnings about the data (job.json), one line each.
  std::vector<std::string> warnings;
};

// Whether a process of this pid exists and has not exited (a dead worker's pid may be another
// process's later). A zombie, exited but not yet reaped (a detached coordinator's parent may be
// an init that reaps late), counts as exited.
bool process_alive(long pid);

// Waits until process `pid` has exited, polling, up to `timeout`; whether it has.
bool wait_for_exit(long pid, std::chrono::milliseconds timeout);

// Every job of the state dir, oldest first; unreadable entries are skipped. Without
// `final_reports` an ended job's final_operators is left empty (every `run` counts the workers
// of running jobs: reading each ended job's operators.json there only slowed its start).
std::vector<JobEntry> list_jobs(const std::filesystem::path& state_dir, bool final_reports = true);

// The jobs of the state dir that run now (state running or restarting, coordinator alive),
// without their final reports. Every `run` counts their workers against the host's limit, and
// a state dir keeps every job a cron entry ever ran: a job.json that does not hold the words
// "running" or "restarting" anywhere is not parsed (parsing all of 595 job.json files was 7%
// of a 0.9 CPU s job at parallelism 2).
std::vector<JobEntry> list_live_jobs(const std::filesystem::path& state_dir);

// The job named by `job`: an id, or a job name: the running (or restarting) job of that name,
// else the newest job of that name. Throws Error(Usage) when no job has it, or when several
// running jobs do (naming their ids).
JobEntry find_job(const std::filesystem::path& state_dir, const std::string& job);

} // namespace streamctl::runtime
