#pragma once
// The job that `streamctl rescale JOB` asks for, planned before anything changes, so that a
// bad request leaves the running job alone.

#include <string>

#include "pipeline/runtime/job_loader.hpp"
#include "pipeline/spec/worker_limits.hpp"
#include "state/error.hpp"

namespace streamctl::runtime {

// `changes`: lines "parallelism=N" (the default of every node without its own) or "NODE=N",
// applied as --set overrides after `job`'s own. Fails, saying why, when a node is unknown,
// the result is not a valid job, exceeds `limits`, or a parallelism exceeds max_parallelism:
// requests that can never work, as against a job not ready for one.
Result<LoadedJob> plan_rescale(const LoadedJob& job, const std::string& changes,
                               const pipeline::WorkerLimits& limits);

} // namespace streamctl::runtime
