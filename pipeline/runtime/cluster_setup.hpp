#pragma once
// How the coordinator turns a pipeline's [cluster] (SPEC §9, pipeline/spec/cluster_spec.hpp)
// into running workers: the launcher to use, the checks made before anything starts, and
// the host of every task.
//
// Not thread-safe: the coordinator's thread only.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <spdlog/logger.h>

#include "pipeline/runtime/coordinator.hpp"
#include "pipeline/runtime/job_loader.hpp"
#include "pipeline/runtime/launcher.hpp"
#include "pipeline/spec/cluster_spec.hpp"

namespace streamctl::runtime {

// The local launcher, or for `launcher = "ssh"` / `"slurm"` that launcher behind a
// ClusterLauncher (tasks that stay on this host start locally). Throws Error(Usage) when ssh
// or srun is not installed. For slurm outside an allocation, the launcher makes one for the
// tasks of `job` that run on nodes when it prepares (slurm_allocation.hpp).
std::unique_ptr<Launcher> make_launcher(const LoadedJob& job, const pipeline::ClusterSpec& cluster,
                                        const RunOptions& options, spdlog::logger& log);

// The host of every task of `job` (by task id; "" = this host) on `hosts`. Throws
// Error(Usage) naming what is missing when the job cannot be placed.
std::vector<std::string> place_tasks(const LoadedJob& job, const std::vector<HostInfo>& hosts);

} // namespace streamctl::runtime
