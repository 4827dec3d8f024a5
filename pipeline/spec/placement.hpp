#pragma once
// Which host runs each task of a plan (SPEC §9). A pure function of the spec, the plan and the
// hosts: the same input always gives the same placement, so `graph` shows what `run` does.
//
// Rules, per chain (a task is one subtask of a chain, so a fused chain stays in one process):
// - A chain holding a node that reads or writes the coordinator's terminal (stdin, stdout), or
//   a file node with neither `shared = true` nor `host`, runs on the coordinator's host, all its
//   subtasks; those take no slot of the hosts.
// - A chain with a node saying `host = "h"` runs on h, all its subtasks. Two different pins in
//   one chain, or a pin in a chain that must stay on the coordinator's host, are errors.
// - Every other chain is spread: each of its subtasks, in order, goes to the host that holds
//   the fewest of that chain's subtasks so far, then to the one with the most free slots, then
//   to the one listed first. So an operator's subtasks land on different hosts while any host
//   has room, and the busiest hosts get the least.
// - Each task on a host takes one of its slots; pinned chains take theirs first. Without hosts
//   (the local launcher) every task runs on the coordinator's host.

#include <string>
#include <vector>

#include "pipeline/spec/pipeline_spec.hpp"
#include "pipeline/spec/plan.hpp"
#include "state/error.hpp"

namespace streamctl::pipeline {

// A host workers may run on, as the launcher found it (or [cluster] hosts says, for `graph`).
struct PlacementHost {
  std::string name; // as written in [cluster] hosts ("ops@worker2"), or a Slurm node's name
  int slots = 0;    // workers it takes
};

enum class ChainSite {
  Coordinator, // on the coordinator's host: `reason` says why
  Pinned,      // on `host`, named by a node's `host`
  Spread,      // across the hosts
};

struct ChainPlacement {
  ChainSite site = ChainSite::Coordinator;
  std::string host;   // Pinned: the host's name as in the hosts given to place()
  std::string reason; // Coordinator and Pinned: "stdin source 'in' reads the terminal", ...
};

struct Placement {
  std::vector<std::string> task_hosts; // by task id: a host's name; "" = the coordinator's host
  std::vector<ChainPlacement> chains;  // by chain id

  const std::string& host_of(int task) const { return task_hosts[static_cast<std::size_t>(task)]; }
};

// Fails, with every problem in one message (one per line), when a pin names no host, a chain
// holds conflicting pins, or the hosts lack the slots: the message names what the job needs
// and each host's slots, and suggests fixes.
Result<Placement> place(const PipelineSpec& spec, const PhysicalPlan& plan,
                        const std::vector<PlacementHost>& hosts);

} // namespace streamctl::pipeline
