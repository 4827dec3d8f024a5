#include "pipeline/spec/placement_preview.hpp"

#include <algorithm>

namespace streamctl::pipeline {

PlacementPreview preview_placement(const PipelineSpec& spec, const PhysicalPlan& plan) {
  PlacementPreview p;
  p.cluster = cluster_of(spec);
  // Enough for any placement: every task on that one host.
  int enough = std::max<int>(1, static_cast<int>(plan.tasks.size()));
  if (p.cluster.launcher == LauncherKind::Slurm) {
    for (const auto& n : spec.nodes) {
      bool listed = std::any_of(p.hosts.begin(), p.hosts.end(),
                                [&](const PlacementHost& h) { return h.name == n.host; });
      if (!n.host.empty() && !listed) p.hosts.push_back(PlacementHost{n.host, enough});
    }
    p.hosts.push_back(PlacementHost{slurm_stand_in, enough});
  } else {
    for (const auto& h : p.cluster.hosts) {
      p.hosts.push_back(PlacementHost{h.name, h.slots.value_or(enough)});
      if (!h.slots) p.assumed.push_back(h.name);
    }
  }
  p.placement = place(spec, plan, p.hosts);
  return p;
}

} // namespace streamctl::pipeline
