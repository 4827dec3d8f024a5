#pragma once
// The placement `graph` and `validate` show before a run, when the hosts' core counts are not
// known yet (`run` reads them over ssh, or from the Slurm allocation):
// - a host of [cluster] hosts without `slots` is placed as if it had as many slots as the job
//   has tasks, and is listed in `assumed`;
// - under the slurm launcher the hosts are the allocation's nodes: the preview places spread
//   chains on one stand-in host, `slurm_stand_in`, and each pinned name is taken for a node
//   with enough slots; only what does not depend on the allocation is shown as final.
// With explicit slots on every host, the preview is the placement `run` makes.

#include <string>
#include <vector>

#include "pipeline/spec/cluster_spec.hpp"
#include "pipeline/spec/placement.hpp"

namespace streamctl::pipeline {

inline constexpr const char* slurm_stand_in = "(a node of the Slurm allocation)";

struct PlacementPreview {
  ClusterSpec cluster;
  std::vector<PlacementHost> hosts; // as given to place()
  std::vector<std::string> assumed; // hosts whose slots were not given
  Result<Placement> placement = fail("not placed");
};

PlacementPreview preview_placement(const PipelineSpec& spec, const PhysicalPlan& plan);

} // namespace streamctl::pipeline
