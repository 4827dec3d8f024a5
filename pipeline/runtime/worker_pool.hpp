#pragma once
// The workers of one attempt of a job: one per task, or one per group of tasks that share a
// process (pipeline/spec/worker_sharing.hpp), started through a Launcher, told things
// over the control channel, and watched (their latest messages, their exits, their silence).
// The pool knows processes and messages, not what the job does with them: a worker's death
// or silence is reported to the caller, which decides between restart and failure.
//
// Not thread-safe: used by the coordinator's thread only.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

#include "pipeline/runtime/child_process.hpp"
#include "pipeline/runtime/control_channel.hpp"
#include "pipeline/runtime/job_loader.hpp"
#include "pipeline/runtime/launcher.hpp"
#include "pipeline/runtime/job_metrics.hpp"
#include "pipeline/runtime/metrics_view.hpp"
#include "pipeline/runtime/task_chain.hpp"

namespace streamctl::runtime {

using Clock = std::chrono::steady_clock;

// One task of the running attempt and what its worker last said.
struct TaskRuntime {
  const pipeline::Task* task = nullptr; // into the job's plan, which outlives the attempt
  std::string label;                    // "clicks -> ok[1]"
  std::string host;                     // where it runs; empty: the coordinator's host
  bool source = false;                  // its chain starts with a source
  // Shared by the tasks of one worker process (pipeline/spec/worker_sharing.hpp).
  std::shared_ptr<ChildProcess> process;
  std::string endpoint; // where its input is bound, from READY
  int worker_pid = 0;   // the worker's pid on its host, from READY (0: not ready yet)
  bool ready = false;
  bool parked = false;       // told to wait for a task of the next plan (kept_chain.hpp)
  unsigned kept_groups = 0;  // from READY: key groups its restore kept in memory
  bool finished = false;
  Clock::time_point last_seen;
  std::vector<NodeMetrics> metrics; // the latest report's (attempt counters)
  TaskLoad load;                    // the latest report's
  // The reports of about the last minute, oldest first, for rates (metrics_book.hpp).
  struct Report {
    Clock::time_point at;
    std::vector<NodeMetrics> metrics;
    TaskLoad load;
  };
  std::deque<Report> history;
  CheckpointFigures last_checkpoint; // its part of the job's last completed checkpoint
  std::vector<NodeLatency> latency;  // the latest report's, when latency markers are on
  std::vector<FieldPresenceReport> field_presence; // from FINISHED

  // Keeps a report from a HEARTBEAT or FINISHED message.
  void record_report(Clock::time_point now, std::vector<NodeMetrics> reported, const TaskLoad& reported_load);
};

// What every worker of one attempt is told on its command line.
struct AttemptArgs {
  std::filesystem::path job_dir;
  std::filesystem::path socket_dir;
  std::string control_endpoint;
  std::string transport;
  int attempt = 0;
  std::filesystem::path restore;   // empty: from nothing
  std::filesystem::path spool_dir; // empty: the job takes no checkpoints
  std::string run_tag;             // with spool_dir
  std::vector<std::string> log_flags;
  // By task id, from placement; a task beyond it or "" runs on the coordinator's host.
  std::vector<std::string> hosts;
  // The worker's bootstrap (worker_bootstrap.hpp): the job and its keys, for a job with hosts;
  // empty: local workers read the job from job_dir.
  std::string bootstrap;
};

// A worker that a rescale keeps (kept_chain.hpp), parked by halt_all, for start() to reassign.
struct ParkedWorker {
  int old_task = 0;
  int old_attempt = 0;
  std::shared_ptr<ChildProcess> process;
};

class WorkerPool {
public:
  WorkerPool(Launcher& launcher, ControlChannel& control)
      : launcher_(launcher), control_(control) {}
  ~WorkerPool() { clear(); }
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Starts the workers of the tasks of `job`'s plan, grouped as worker_sharing.hpp says; `job`
  // must outlive the attempt. Throws what Launcher::start throws.
  // `kept`, by task id of `job`'s plan: workers parked in the last attempt that run those tasks
  // now (told by REASSIGN) instead of new ones.
  void start(const LoadedJob& job, const AttemptArgs& args, std::map<int, ParkedWorker> kept = {});
  // The parked workers still running, by their task id in this attempt; they leave the pool.
  std::map<int, ParkedWorker> take_parked();
  // Kills and reaps every worker still running; the attempt is over.
  void clear() { tasks_.clear(); }

  int attempt() const { return attempt_; }
  bool empty() const { return tasks_.empty(); }
  std::size_t size() const { return tasks_.size(); } // tasks
  std::size_t process_count() const;
  TaskRuntime& operator[](std::size_t index) { return tasks_[index]; }
  const TaskRuntime& operator[](std::size_t index) const { return tasks_[index]; }
  const std::vector<TaskRuntime>& tasks() const { return tasks_; }
  // The index of the task that sent `m`; none when it is of an older attempt.
  std::optional<std::size_t> sender_of(const transport::ControlMessage& m) const;

  bool all_ready() const;
  bool all_finished() const;
  bool none_finished() const;
  bool all_running() const { return all_ready() && none_finished(); }
  std::size_t source_count() const;
  // By label; 0 for a worker that has exited (job.json's pids).
  std::map<std::string, int> pids() const;
  std::vector<std::vector<NodeMetrics>> metrics() const;

  // To a worker that still runs; one that has gone misses it.
  void send(const TaskRuntime& task, const transport::ControlMessage& message);
  void send_all(const transport::ControlMessage& message);
  void send_sources(const transport::ControlMessage& message);

  // CANCEL, a grace period to abort sinks, then SIGKILL: every worker is reaped after. CANCEL
  // names the newest completed checkpoint (note_completed), whose prepared output the sinks
  // keep (Sink::cancel).
  void cancel_all();
  // Checkpoint (or savepoint) `id` completed: from now on a CANCEL keeps its prepared output.
  // Before its COMMIT or RELEASE goes out.
  void note_completed(std::uint64_t id) { completed_ = std::max(completed_, id); }
  // HALT (end without publishing more), a grace period, then SIGKILL. The tasks in `park`
  // (a rescale keeps their workers) are told HALT park=1 instead, and not waited for.
  void halt_all(const std::vector<int>& park = {});
  // RELEASE (every task has finished: exit), then waits for every worker to exit so that its
  // output is flushed. `wait` blocks until a worker may have exited (SIGCHLD), a message came
  // or a short while has passed, and says whether the job was cancelled meanwhile (a second
  // SIGINT: its workers are gone then, and so is the rest of the wait): publishing into a
  // reader that stalls must not make the coordinator deaf to signals. Every message but this
  // attempt's FAILED goes to `serve`: a client asking the job something (`status`, `rescale`)
  // gets its answer now, not never (the coordinator ends after this).
  struct Release {
    bool cancelled = false;
    std::vector<std::string> unclean; // labels of the workers that did not exit 0
    // When some did not: the reasons of this attempt's FAILED messages waiting on the control
    // channel, read without acting on them (after RELEASE a failure is not restarted), and
    // whether every one of them says that the reader of stdout has gone.
    std::string reasons;
    bool reader_gone = false;
  };
  Release release(const std::function<bool()>& wait,
                  const std::function<void(const ControlChannel::Incoming&)>& serve);

  struct Reaped {
    pid_t pid = 0;
    TaskRuntime* task = nullptr; // none: not one of this attempt's workers
  };
  // Reaps one exited child of this process (waitpid(-1), not blocking), if any. Of the tasks
  // that shared it, the one named is one that had not finished, if any.
  std::optional<Reaped> reap_next();
  // Kills the first running, unfinished worker not heard from within `timeout`, if any, and
  // says so: "worker for LABEL (pid N) sent no heartbeat for S s".
  std::optional<std::string> kill_silent_worker(Clock::time_point now,
                                                std::chrono::milliseconds timeout);

private:
  // Starts one process for the tasks `group` (ids into tasks_), which share it.
  void launch(const LoadedJob& job, const AttemptArgs& args, const std::vector<int>& group);
  void end_all(const char* message, std::chrono::milliseconds grace,
               std::chrono::milliseconds poll, const std::vector<int>& park = {});

  std::uint64_t completed_ = 0; // the newest completed checkpoint (note_completed)

  Launcher& launcher_;
  ControlChannel& control_;
  int attempt_ = 0;
  std::vector<TaskRuntime> tasks_;
};

} // namespace streamctl::runtime
