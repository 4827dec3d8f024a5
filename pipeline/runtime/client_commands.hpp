#pragma once
// The commands of `streamctl status|stop|cancel|savepoint|rescale JOB`, which arrive on the
// control socket from a DEALER that connects for one request (job_client.hpp); workers never
// send them. Each gets one reply: at once, or, for a savepoint (also `stop` without --drain)
// and a rescale, when it completes or fails.
//
// Not thread-safe: used by the coordinator's thread only.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <spdlog/logger.h>

#include "pipeline/runtime/checkpoint_coordinator.hpp"
#include "pipeline/runtime/control_channel.hpp"
#include "pipeline/runtime/job_loader.hpp"
#include "pipeline/runtime/metrics_view.hpp"
#include "pipeline/runtime/worker_pool.hpp"
#include "pipeline/spec/worker_limits.hpp"
#include "state/error.hpp"

namespace streamctl::runtime {

// What client commands ask of the job as a whole. Implemented by the coordinator; called on
// its thread from within ClientCommands::handle.
class JobControl {
public:
  virtual ~JobControl() = default;
  // "running", "restarting" or "stopping", for `status`.
  virtual std::string state() const = 0;
  // Restarts after failures so far.
  virtual int restarts() const = 0;
  // Stopping, or restarting after a failure: no savepoint can be taken now.
  virtual bool stopping_or_restarting() const = 0;
  // `stop --drain`: sources end their input as if it were exhausted, and the job drains.
  virtual void drain() = 0;
  // `cancel`: every worker goes at once, committing nothing; the job fails with `reason`.
  virtual void cancel(const std::string& reason) = 0;
};

class ClientCommands {
public:
  // Every collaborator must outlive this object (`job` may be reassigned by a rescale).
  ClientCommands(const LoadedJob& job, const pipeline::WorkerLimits& limits, WorkerPool& workers,
                 CheckpointCoordinator& checkpoints, ControlChannel& control,
                 JobControl& control_of_job, spdlog::logger& log)
      : job_(job), limits_(limits), workers_(workers), checkpoints_(checkpoints), control_(control),
        job_control_(control_of_job), log_(log) {}

  // Why a rescaled job would not fit the job's hosts, if it would not (a job with hosts sets
  // it): such a rescale is refused before its savepoint stops anything.
  using PlacementCheck = std::function<std::optional<std::string>(const LoadedJob&)>;
  void set_placement_check(PlacementCheck check) { placement_check_ = std::move(check); }
  // What `status` shows of the job's operators (the coordinator's MetricsBook).
  void set_metrics(std::function<JobMetrics()> metrics) { metrics_ = std::move(metrics); }
  // Warnings about the data so far for `status` (a node that passed on nothing, a field no
  // record had), one line each.
  void set_warnings(std::function<std::vector<std::string>()> warnings) { warnings_ = std::move(warnings); }
  // The autoscaler's last decision for `status`, a JSON object or "" (autoscaler.hpp).
  void set_autoscale_status(std::function<std::string()> last) { autoscale_ = std::move(last); }

  static bool is_client_command(const transport::ControlMessage& m);
  // `identity`: the client's ROUTER identity, to reply to.
  void handle(const std::string& identity, const transport::ControlMessage& m);

  // The autoscaler's rescale to `changes` ("NODE=N" lines), as `streamctl rescale` but with no
  // client to answer: why it cannot start, if it cannot (the job goes on unchanged). One that
  // starts and fails later (its savepoint) is logged and leaves the job at its parallelism.
  std::optional<std::string> rescale(const std::string& changes);
  // Why a savepoint asked for now (savepoint, stop, rescale) cannot be taken, if it cannot.
  std::optional<std::string> why_no_savepoint_now() const;
  bool finishing() const;

private:
  void request_rescale(const std::string& client, const std::string& changes);
  // The rescale's next job, checked; or why it can never be.
  Result<LoadedJob> plan_checked(const std::string& changes) const;
  void start_rescale(const std::string& client, LoadedJob next);
  void request_savepoint(const std::string& client, const std::string& dir, bool stop_after);

  const LoadedJob& job_;
  const pipeline::WorkerLimits& limits_;
  WorkerPool& workers_;
  CheckpointCoordinator& checkpoints_;
  ControlChannel& control_;
  JobControl& job_control_;
  spdlog::logger& log_;
  PlacementCheck placement_check_;
  std::function<JobMetrics()> metrics_;
  std::function<std::string()> autoscale_;
  std::function<std::vector<std::string>()> warnings_;
};

} // namespace streamctl::runtime
