#pragma once
// Where a run of a job stands: running, stopping (draining), waiting to restart after a
// failure, about to rescale, or ended (finished, stopped, failed, cancelled) with its
// outcome; and job.json, which records it for `list` and `status`. The transitions that end
// the running attempt are here; the coordinator's loop asks interrupted() after each event
// and then starts the next attempt, or ends the run.
//
// It is the checkpoints' listener (a completed snapshot may stop or rescale the job) and the
// client commands' JobControl.
//
// Not thread-safe: used by the coordinator's thread only.

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>

#include <spdlog/logger.h>

#include "pipeline/runtime/metrics_view.hpp"
#include "pipeline/runtime/checkpoint_coordinator.hpp"
#include "pipeline/runtime/checkpoint_settings.hpp"
#include "pipeline/runtime/client_commands.hpp"
#include "pipeline/runtime/control_channel.hpp"
#include "pipeline/runtime/coordinator.hpp"
#include "pipeline/runtime/job_registry.hpp"
#include "pipeline/runtime/worker_pool.hpp"

namespace streamctl::runtime {

class JobState final : public CheckpointListener, public JobControl {
public:
  // The collaborators must outlive this object.
  JobState(const RestartSettings& restart, JobRegistration& registration, WorkerPool& workers,
           ControlChannel& control, spdlog::logger& log)
      : restart_(restart), registration_(registration), workers_(workers), control_(control),
        log_(log) {
    outcome_.job_id = registration.id();
  }

  // The running attempt must end: the job ended, or restarts (failure, rescale).
  bool interrupted() const { return ended_ || restart_pending_ || rescale_to_.has_value(); }
  bool ended() const { return ended_; }
  bool stopping() const { return stopping_; }
  bool restart_pending() const { return restart_pending_; }
  RunOutcome& outcome() { return outcome_; }

  // A task failed or its worker died: a restart per [restart], or the job fails. True when a
  // restart is now pending: the caller gives up the pending checkpoint.
  bool task_failed(std::string reason);
  // A worker's FAILED message: by its kind, the job ends with exit 141 (the reader of stdout
  // has gone), 3 (a snapshot) or 2 (a pipeline error), or the task failed (as task_failed).
  bool worker_failed(const transport::ControlMessage& m);
  // The job fails: every worker is cancelled. Exit 1 unless outcome().exit_code says else.
  void fail(const std::string& reason);
  // Sources end their input as if it were exhausted, so the job drains and commits.
  void request_stop();
  // A second SIGINT or SIGTERM: every worker goes at once; exit `exit_code`.
  void cancel_on_signal(int exit_code);

  // Between attempts, after a failure: the restart's number (1 for the first), and why.
  int begin_restart();
  const std::string& last_failure() const { return last_failure_; }
  // Why the job failed, for `status` (the latest failure since the last restart).
  const std::optional<FailureCause>& failure() const { return failure_; }
  // Waiting out the restart delay, with no workers.
  void set_restarting(bool restarting) { restarting_ = restarting; }
  // After the delay: false when the job ended, or was stopped, meanwhile (there is nothing
  // running to drain: it ends as stopped).
  bool restart_may_go_on();
  // Between attempts, for a rescale: the job to run next.
  bool rescale_pending() const { return rescale_to_.has_value() && !ended_; }
  LoadedJob take_rescaled();
  // Records flow in a new attempt: after a rescale, its client gets the answer (the snapshot
  // it started from and the parallelism it runs at).
  void attempt_flowing(const std::filesystem::path& snapshot, const std::string& parallelism);

  // job.json: the job's state and workers now; record_end: its final state, once it has ended.
  void record(const std::string& state) { registration_.update(state, workers_.pids()); }
  void record_end();

  // CheckpointListener
  void checkpoint_completed(const std::filesystem::path& dir) override;
  void rescale_ready(LoadedJob next, const std::string& client, Clock::time_point halted) override;
  void stopped_at(const std::filesystem::path& snapshot) override;
  void drain_instead() override { request_stop(); }

  // JobControl
  std::string state() const override;
  int restarts() const override { return restarts_; }
  bool stopping_or_restarting() const override {
    return stopping_ || restart_pending_ || restarting_;
  }
  void drain() override { request_stop(); }
  void cancel(const std::string& reason) override;

private:
  const RestartSettings& restart_;
  JobRegistration& registration_;
  WorkerPool& workers_;
  ControlChannel& control_;
  spdlog::logger& log_;

  RunOutcome outcome_;
  std::string final_state_;
  bool stopping_ = false;
  bool ended_ = false;
  int restarts_ = 0; // restarts after failures, counted against [restart] max_attempts
  bool restart_pending_ = false;
  bool restarting_ = false; // waiting out the restart delay, no workers
  std::string last_failure_;
  std::optional<FailureCause> failure_;
  std::optional<LoadedJob> rescale_to_;
  std::string rescale_client_;
  // The client of a rescale that will not run at its new parallelism gets ERROR `message`.
  void refuse_rescale_client(const std::string& message);
  Clock::time_point rescale_halted_{};
  bool rescaled_ = false; // until the rescaled attempt's records flow
};

} // namespace streamctl::runtime
