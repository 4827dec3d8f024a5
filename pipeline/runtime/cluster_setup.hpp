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
// or srun is not installed, and for slurm outside an allocation.
std::unique_ptr<Launcher> make_launcher(const pipeline::ClusterSpec& cluster, const RunOptions& options,
                                        spdlog::logger& log);

// What a job with hosts needs that this version does not do yet, refused with Error(Usage)
// (exit 2) before anything starts: checkpoints with storage = "coordinator" (workers on other
// hosts cannot yet send their snapshot files to the coordinator). Restores with that storage
// are no reason: workers fetch the snapshot from the coordinator (snapshot_server.hpp).
void check_cluster_supported(const pipeline::ClusterSpec& cluster, bool takes_snapshots);
// Why a savepoint (`savepoint`, `stop`, `rescale`) cannot be taken of a job with hosts that
// keeps storage "coordinator", if that is the case.
std::optional<std::string> why_no_savepoints(const pipeline::ClusterSpec& cluster);

// The host of every task of `job` (by task id; "" = this host) on `hosts`. Throws
// Error(Usage) naming what is missing when the job cannot be placed.
std::vector<std::string> place_tasks(const LoadedJob& job, const std::vector<HostInfo>& hosts);

} // namespace streamctl::runtime
