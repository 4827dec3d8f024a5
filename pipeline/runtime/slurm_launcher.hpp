#pragma once
// Starts workers as job steps of the Slurm allocation the coordinator runs in ([cluster]
// launcher = "slurm", SPEC §9): `salloc -N 3 streamctl run job.toml`, or `streamctl run` in
// the user's own sbatch script. The allocation is the one in the environment (SLURM_JOB_ID,
// SLURM_JOB_NODELIST); its nodes are the job's hosts, named as Slurm names them.
//
//   srun --jobid=J --nodes=1 --ntasks=1 --nodelist=NODE --overlap --quiet --mpi=none
//        --input=0 -- BINARY worker ARGS... --bootstrap-fd 0
//
// One step per worker (a step per host would need a streamctl that starts workers there: not
// built). srun execs its argv without a shell, so nothing is quoted. --overlap: steps share
// the allocation's CPUs (placement decides the slots, not Slurm). The worker's bootstrap goes on
// srun's stdin, which srun forwards to the task (--input=0: task 0, the only one) and closes
// when it closes: EOF there, as with ssh, ends the worker when the coordinator goes. kill -9 of
// srun, and scancel of the allocation, end the step's task (slurmd kills it).
//
// The coordinator's address as the nodes reach it: the SLURM_LAUNCH_NODE_IPADDR that srun's
// step sees (the address slurmd itself connects back to srun on), printed by the probe step.
// Not $SSH_CONNECTION (srun exports the caller's environment, so that would name whoever
// logged in to the login node).
//
// Slots per node: SLURM_JOB_CPUS_PER_NODE ("4,2(x2)"), else the node's cores as the probe saw
// them.
//
// Without an allocation in the environment, `allocate` says how to make one: prepare() runs
// salloc (slurm_allocation.hpp) and uses the job id and node list it gets exactly as it would
// the environment's; the allocation is released when the launcher is destroyed.
//
// Threading: the coordinator's thread only (launcher.hpp). prepare() reaps its own children by
// pid: the caller must not reap with waitpid(-1) while it runs.

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/runtime/launcher.hpp"
#include "pipeline/runtime/slurm_allocation.hpp"
#include "state/error.hpp"

namespace streamctl::runtime {

// Plain data; slurm_config_from_environment() fills the allocation's part, or the
// allocation prepare() makes does.
struct SlurmLauncherConfig {
  std::string job_id;        // SLURM_JOB_ID
  std::string nodelist;      // SLURM_JOB_NODELIST, compressed: "h[1-3],gpu7"
  std::string cpus_per_node; // SLURM_JOB_CPUS_PER_NODE: "2(x3)"; may be empty
  std::string binary;        // streamctl on the nodes; empty: self_executable
  std::string self_executable;
  std::string srun_program = "srun";
  std::string scontrol_program = "scontrol";
  std::chrono::seconds probe_timeout{60};
  // Used when job_id is empty: the allocation to make.
  std::optional<SlurmAllocationRequest> allocate;
};

// The allocation of this process's environment; nullopt when there is none (SLURM_JOB_ID or
// SLURM_JOB_NODELIST is not set).
std::optional<SlurmLauncherConfig> slurm_config_from_environment();

// SLURM_JOB_CPUS_PER_NODE ("4,2(x2)") as one count per node, in node-list order. Fails on a
// malformed value or when the counts do not cover `nodes` nodes.
Result<std::vector<int>> expand_cpus_per_node(std::string_view text, std::size_t nodes);

class SlurmLauncher : public Launcher {
public:
  explicit SlurmLauncher(SlurmLauncherConfig config);

  std::string_view name() const override { return "slurm"; }
  // Makes the allocation if there is none yet (config.allocate), expands the node list
  // (scontrol show hostnames) and runs a probe step on every node at once. Throws
  // Error(Usage) naming every node that failed and why, or why salloc gave no allocation.
  std::vector<HostInfo> prepare() override;
  HostCheck check_hosts() override;
  // `launch.host` must be a node of the allocation. The ChildProcess is the local srun.
  std::unique_ptr<ChildProcess> start(const WorkerLaunch& launch) override;

  // srun's argv (srun first) running `command` as one task on `node`.
  std::vector<std::string> srun_command(const std::string& node,
                                        const std::vector<std::string>& command) const;
  // What start() runs: srun_command(node, BINARY worker ARGS... --bootstrap-fd 0).
  std::vector<std::string> worker_command(const std::string& node,
                                          const std::vector<std::string>& worker_args) const;

private:
  std::vector<std::string> nodes(); // the allocation's, expanded, cached

  SlurmLauncherConfig config_;
  std::vector<std::string> nodes_;
  std::unique_ptr<SlurmAllocation> allocation_; // the one made here, if any: released with the launcher
};

} // namespace streamctl::runtime
