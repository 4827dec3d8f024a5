#pragma once
// Checkpoint bookkeeping of a running job (SPEC §7): triggers the sources, collects every
// task's acknowledgement, writes _metadata last, lets the sinks commit, prunes old
// checkpoints, and gives up a checkpoint that a task declines, that times out, or that the
// job no longer wants. Savepoints (`savepoint`, `stop`, `rescale`, --savepoint-on-exit) are
// the same barrier into another directory.
//
// What a completed or abandoned snapshot means for the job (halt it, rescale it, drain it)
// is the coordinator's: it is told through CheckpointListener.
//
// Not thread-safe: used by the coordinator's thread only.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <spdlog/logger.h>

#include "pipeline/runtime/checkpoint_settings.hpp"
#include "pipeline/runtime/control_channel.hpp"
#include "pipeline/runtime/job_loader.hpp"
#include "pipeline/runtime/spool_janitor.hpp"
#include "pipeline/runtime/worker_pool.hpp"

namespace streamctl::runtime {

// What the end of a snapshot asks of the job as a whole. Implemented by the coordinator;
// called on its thread from within CheckpointCoordinator's calls.
class CheckpointListener {
public:
  virtual ~CheckpointListener() = default;
  // `dir`'s _metadata is written: it is the job's latest completed snapshot. Called before the
  // workers are told to COMMIT.
  virtual void checkpoint_completed(const std::filesystem::path& dir) = 0;
  // The savepoint of a rescale is complete and every worker has halted: the job is to start
  // `next` from it; `client` awaits the answer; `halted` is when the sources stopped.
  virtual void rescale_ready(LoadedJob next, const std::string& client,
                             Clock::time_point halted) = 0;
  // The snapshot that stops the job is complete and every worker has halted.
  virtual void stopped_at(const std::filesystem::path& snapshot) = 0;
  // The snapshot that was to end the job at the end of its input failed: drain instead.
  virtual void drain_instead() = 0;
};

// The restore a job starts from must fit its pipeline (SPEC §7). Throws Error(Snapshot) (exit
// 3) when `path` cannot be read, is damaged, or does not fit `spec`.
void check_restore(const std::filesystem::path& path, const pipeline::PipelineSpec& spec,
                   bool allow_non_restored);

class CheckpointCoordinator {
public:
  // `latest`: the snapshot the job starts from, if any; `job` and the collaborators must
  // outlive this object (`job` may be reassigned by a rescale).
  CheckpointCoordinator(const LoadedJob& job, const CheckpointSettings& settings,
                        std::string job_id, std::optional<std::filesystem::path> latest,
                        WorkerPool& workers, ControlChannel& control, SpoolJanitor& spool,
                        CheckpointListener& listener, spdlog::logger& log);

  // Periodic checkpoints are configured ([checkpoint] interval).
  bool enabled() const { return settings_.interval.count() > 0; }

  // A new attempt starts from `restored_from` (empty: from nothing): no source has ended.
  void begin_attempt(const std::filesystem::path& restored_from);
  // Records flow: the first periodic checkpoint is one interval away.
  void data_flowing(Clock::time_point now) { next_trigger_ = now + settings_.interval; }
  // Triggers a periodic checkpoint when one is due (none while `stopping` or after a source
  // or task has ended), and gives up one that has timed out.
  void maybe_trigger(Clock::time_point now, bool stopping);
  void check_timeout(Clock::time_point now);
  // The earlier of `fallback` and the next moment one of the two above has work.
  Clock::time_point next_duty(Clock::time_point fallback) const;

  struct Request {
    std::filesystem::path dir;
    bool savepoint = false;
    bool stop_after = false;           // halt the job once it completes
    bool at_end = false;               // taken because the input ended: when it fails, drain
    bool final = false;                // every task has finished: each snapshots directly
    std::string client;                // the ROUTER identity awaiting the path, if any
    std::optional<LoadedJob> rescaled; // a rescale: the job to start from it
  };
  // Tells every source task to snapshot and inject barrier N (a final one: every task, with no
  // barrier, since no record moves any more); false (logged, and the client told) when the
  // directory cannot be made.
  bool trigger(Request request);
  // Gives up the pending snapshot, if any; the job goes on (SPEC §7). `error`: logged as an
  // error (a person should act: a full disk), else as a note.
  void abort_pending(const std::string& why, bool error);
  // The job has ended with a request pending (a failure without restart, a cancel): its
  // client, if any, is told `why`; nothing else is done (no worker is left to resume).
  void answer_pending_client(const std::string& why);

  // Messages of the running attempt's tasks.
  void on_ack(std::size_t task, const transport::ControlMessage& m);
  void on_decline(const TaskRuntime& task, const transport::ControlMessage& m);
  // --savepoint-on-exit: once every source has read all its input, a savepoint ends the run.
  void on_source_exhausted();

  // Makes a task's counters at the barrier (its ACK's) what _metadata keeps (MetricsBook::
  // checkpoint_counts); unset: kept as the ACK says.
  using CountsOfTask = std::function<std::string(const TaskRuntime&, std::string_view)>;
  void set_counts_of_task(CountsOfTask counts) { counts_of_task_ = std::move(counts); }
  // Whether a rescale keeps the workers whose key groups stay (worker_reuse.hpp): local
  // workers only, for now.
  void set_keep_workers_on_rescale(bool keep) { keep_workers_on_rescale_ = keep; }

  bool pending() const { return pending_.has_value(); }
  // The checkpoint or savepoint being taken now and its directory, if any: where the
  // workers' snapshot files go (snapshot_receiver.hpp, when they come over the control link).
  struct InFlight {
    std::uint64_t id = 0;
    std::filesystem::path dir;
  };
  std::optional<InFlight> in_flight() const {
    if (!pending_) return std::nullopt;
    return InFlight{pending_->id, pending_->request.dir};
  }
  // A savepoint, or a checkpoint that stops the job (a rescale's, a stop's on a signal): one
  // that another must not abort.
  bool savepoint_in_progress() const { return pending_ && (pending_->request.savepoint || pending_->request.stop_after); }
  std::size_t exhausted_sources() const { return exhausted_sources_; }
  const std::optional<std::filesystem::path>& latest_completed() const { return latest_completed_; }
  // Checkpoints and savepoints this run completed, and those that failed (not those given up
  // because the input ended or a task failed).
  std::uint64_t completed_count() const { return completed_count_; }
  std::uint64_t failed_count() const { return failed_count_; }

  // CHECKPOINT_DIR/NAME/chk-N for the next id.
  std::filesystem::path next_checkpoint_dir() const;
  // PARENT/savepoint-STAMP-N for the next id; PARENT defaults to CHECKPOINT_DIR/NAME.
  std::filesystem::path savepoint_dir(const std::filesystem::path& parent = {}) const;
  // Deletes what [checkpoint] retain does not keep; logs what it could not.
  void prune() const;

private:
  // ERROR "savepoint|checkpoint failed: WHY" to the request's client, if any, once.
  void tell_client_failed(Request& r, const std::string& why);
  struct PendingCheckpoint {
    std::uint64_t id = 0;
    Request request;
    Clock::time_point started;
    Clock::time_point deadline;
    std::vector<std::optional<CheckpointTaskFile>> files; // by task
    std::vector<CheckpointFigures> figures;               // by task, from the ACKs
    std::size_t acked = 0;
  };
  void complete();

  const LoadedJob& job_;
  bool keep_workers_on_rescale_ = false;
  const CheckpointSettings& settings_;
  std::string job_id_;
  WorkerPool& workers_;
  ControlChannel& control_;
  SpoolJanitor& spool_;
  CheckpointListener& listener_;
  spdlog::logger& log_;

  std::uint64_t next_id_ = 1;
  std::optional<PendingCheckpoint> pending_;
  std::optional<std::filesystem::path> latest_completed_;
  std::filesystem::path restored_from_; // of the running attempt
  std::size_t exhausted_sources_ = 0;
  CountsOfTask counts_of_task_;
  std::uint64_t completed_count_ = 0;
  std::uint64_t failed_count_ = 0;
  Clock::time_point next_trigger_{};
};

} // namespace streamctl::runtime
