#pragma once
// Checks `[cluster]` (SPEC §9) and the nodes' `host` pins against its hosts. Internal to the
// pipeline spec; cluster_spec.hpp reads the checked table.
//
// Messages, each prefixed by FILE:LINE:COL when printed:
//   'cluster.launcher' must be one of local, ssh, slurm; got 'sssh'
//   launcher = "agent" is not supported now: use "ssh" (hosts you can ssh into) or "slurm" ...
//   launcher = "ssh" needs 'hosts': the hosts to start workers on over ssh
//   'hosts' is not used with launcher = "local" (every worker runs on this host): ...
//   'cluster.slurm_options[0]' must be a salloc option like "--partition=debug" ..., got 'x'
//   host 'w2' is listed twice in [cluster] hosts (first at line 3): ...
//   unknown host 'w9' in 'host' of operator 'ok'; valid: w1, ops@w2 (...)

#include <string>
#include <vector>

#include <toml++/toml.h>

#include "pipeline/spec/node_check.hpp"
#include "pipeline/spec/schema_check.hpp"

namespace streamctl::pipeline::detail {

struct ClusterDraft {
  std::string launcher = "local"; // after defaults; empty when it was reported
  std::vector<std::string> hosts; // the entries that were valid, as written
  bool hosts_reported = false;    // an entry had a problem: pins cannot be judged
};

// `cluster` is the [cluster] table, or null when the file has none.
ClusterDraft check_cluster(Checker& checker, const toml::table* cluster);

// Each node's `host` must name one of the hosts (as written or by the part after '@'). Under
// the slurm launcher the hosts are the allocation's nodes, known at run time only: placement
// checks the pins then.
void check_host_pins(Checker& checker, const ClusterDraft& cluster,
                     const std::vector<NodeDraft>& nodes);

} // namespace streamctl::pipeline::detail
