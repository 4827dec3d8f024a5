#pragma once
// How many worker processes a job may start (SPEC §2, streamctl-run(1) LIMITS). Each task of
// the plan is one process; a pipeline of 20,001 unfused nodes or a parallelism of 32,768 is a
// valid graph that no host runs, and forking it brings in the kernel's OOM killer. Two limits
// are checked before anything starts, each raised by its flag:
//
//   per job  (--max-workers N):      the job's tasks;
//   per host (--max-host-workers N): the job's tasks plus the workers of the other jobs running
//                                     on the host under the same state dir.
//
// Both are checked by validate and graph (with no other job counted), by run, restart and
// test, and by a rescale of a running job.

#include <cstddef>
#include <string>

#include "pipeline/spec/diagnostics.hpp"
#include "pipeline/spec/pipeline_spec.hpp"
#include "pipeline/spec/plan.hpp"

namespace streamctl::pipeline {

inline constexpr std::size_t kDefaultMaxWorkersPerJob = 1024;

struct WorkerLimits {
  std::size_t per_job = kDefaultMaxWorkersPerJob;
  std::size_t per_host = kDefaultMaxWorkersPerJob;
  std::string per_host_origin;       // why per_host is what it is: "64 per CPU, 2 CPUs"
  std::size_t running_elsewhere = 0; // workers of other jobs on this host, counted by run
};

// One diagnostic per limit the plan exceeds, placed where the count comes from: the
// `parallelism` (of the node, the pipeline, or -p/--set) of the largest chain when it
// is above 1, else the header of the first node whose chain is past the limit.
Diagnostics check_worker_limits(const PipelineSpec& spec, const PhysicalPlan& plan,
                                const WorkerLimits& limits);

} // namespace streamctl::pipeline
