#pragma once
// The autoscaler's controller ([autoscale] enabled = true, or `run --autoscale`): every
// [autoscale] interval it asks the DS2 policy (ds2_policy.hpp) what parallelism each node needs
// and, when a node's should change, rescales the job the way `streamctl rescale` does (a
// savepoint, then the job restarts at the new parallelism from it).
//
// Observations: one sample of every subtask's last-second rates and busy fraction about once a
// second (each coordinator loop turn that is due one), summed over the interval by decide_ds2.
// Sampling every second rather than reading the figures once at decision time averages out a
// single second's noise (a checkpoint's pause, a burst) over the whole interval, without
// needing the per-minute rates, which since a restart also cover its catch-up.
//
// No decision and no sample: for [autoscale] cooldown after an attempt starts (a rescale or a
// restart after a failure: the restored job catches up on its backlog first, and its rates are
// not its steady state), nor while a savepoint, rescale or restart is in progress (the decision
// waits for the next loop turn that has none). A decision due while a checkpoint is in progress
// waits for it too, but for one interval at most: a job that cannot keep up can have a
// checkpoint pending nearly all the time (its barriers queue behind the backlog), and then the
// rescale gives that checkpoint up, as `streamctl rescale` does.
//
// Not thread-safe: used by the coordinator's thread only.

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <spdlog/logger.h>

#include "pipeline/runtime/autoscale_settings.hpp"
#include "pipeline/runtime/ds2_policy.hpp"
#include "pipeline/runtime/job_loader.hpp"
#include "pipeline/runtime/metrics_view.hpp"
#include "pipeline/runtime/worker_pool.hpp"

namespace streamctl::runtime {

// What the autoscaler asks of the job. Each is called on the coordinator's thread.
struct AutoscaleHooks {
  // The job's figures now (the coordinator's current_metrics()).
  std::function<JobMetrics()> metrics;
  // Why no rescale may start now (a savepoint, rescale or restart in progress), if so.
  std::function<std::optional<std::string>()> busy;
  // A checkpoint is in progress.
  std::function<bool()> checkpointing;
  // Starts a rescale to these "NODE=N" lines; why it could not, if it could not (the job goes on
  // at its parallelism).
  std::function<std::optional<std::string>(const std::string& changes)> rescale;
};

class Autoscaler {
public:
  // `job` is the coordinator's, reassigned by a rescale: it must outlive this object.
  Autoscaler(const LoadedJob& job, AutoscaleSettings settings, AutoscaleHooks hooks,
             spdlog::logger& log);

  // Records flow in a new attempt (the first, or after a rescale or restart): what was sampled
  // before is of another plan; a later attempt waits out the cooldown.
  void attempt_flowing(Clock::time_point now);
  // Each coordinator loop turn while records flow: samples, and decides when due.
  void tick(Clock::time_point now);

  // The last decision for `status`: a JSON object (time, each decided node's old and new
  // parallelism and its rates, what came of it), or "" before the first.
  const std::string& last_decision_json() const { return last_json_; }

private:
  void sample(const JobMetrics& metrics);
  void decide(Clock::time_point now);

  const LoadedJob& job_;
  AutoscaleSettings settings_;
  AutoscaleHooks hooks_;
  spdlog::logger& log_;
  std::vector<Ds2Observation> samples_;
  bool first_attempt_ = true;
  Clock::time_point quiet_until_{}; // the cooldown: no sample before
  Clock::time_point next_sample_{};
  Clock::time_point next_decision_{};
  std::string last_json_;
};

} // namespace streamctl::runtime
