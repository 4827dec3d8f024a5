#pragma once
// The hosts a job runs on and how its workers get there (SPEC §9, `[cluster]`), and where its
// checkpoints are written (`[checkpoint] storage`), read from a validated PipelineSpec.
//
//   [cluster]
//   launcher = "ssh"        # "local" (default without hosts), "ssh" (default with hosts), "slurm"
//   hosts = ["worker1", "ops@worker2", { host = "worker3", slots = 4 }]
//   ssh_options = ["-F", "ops/ssh_config"]
//   binary = "/usr/bin/streamctl"   # on the hosts; default: the coordinator's own path
//   ship_binary = false
//   encrypt = true
//   nodes = 3                          # slurm, outside an allocation: salloc --nodes=3
//   slurm_options = ["--partition=x"]  # slurm, outside an allocation: more salloc options
//   [checkpoint]
//   storage = "coordinator"         # default with hosts or slurm; or "shared"
//
// A node's `host = "NAME"` names one of `hosts` by the entry as written ("ops@worker2") or by
// its address, the part after '@' ("worker2"); validation refuses two entries with the same
// address, so a name matches one host at most.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/spec/pipeline_spec.hpp"

namespace streamctl::pipeline {

enum class LauncherKind { Local, Ssh, Slurm };

enum class CheckpointStorage {
  Coordinator, // workers send their snapshot files to the coordinator, which writes them
  Shared,      // workers write the checkpoint directory themselves (a path every host mounts,
               // or this host's disk when every worker runs here)
};

struct ClusterHost {
  std::string name;         // as written: "ops@worker2"; what ssh is given
  std::string user;         // "ops"; empty when the entry names none
  std::string address;      // "worker2"
  std::optional<int> slots; // absent: the host's core count, learnt at run time
};

struct ClusterSpec {
  LauncherKind launcher = LauncherKind::Local;
  std::vector<ClusterHost> hosts; // empty for the local and slurm launchers
  std::vector<std::string> ssh_options;
  std::string binary; // empty: the coordinator's own path
  bool ship_binary = false;
  bool encrypt = true;
  // The allocation `run` makes with the slurm launcher outside one: --nodes (absent: --ntasks
  // by the job's tasks) and the user's own salloc options, after ours.
  std::optional<int> nodes;
  std::vector<std::string> slurm_options;
  // Default: Coordinator with the ssh and slurm launchers; Shared with the local one, where
  // every worker runs on this host and writes the checkpoint directory itself as before.
  CheckpointStorage storage = CheckpointStorage::Shared;
};

// Reads `spec.root`, which validation has checked: call it on a validated spec only.
ClusterSpec cluster_of(const PipelineSpec& spec);

const char* launcher_name(LauncherKind launcher);    // "local" | "ssh" | "slurm"
const char* storage_name(CheckpointStorage storage); // "coordinator" | "shared"

// "worker2" for "ops@worker2" and for "worker2".
std::string_view host_address(std::string_view host_name);
// Whether `pin` (a node's `host`) names the host entry `host_name`: as written, or its address.
bool pin_names_host(std::string_view pin, std::string_view host_name);

} // namespace streamctl::pipeline
