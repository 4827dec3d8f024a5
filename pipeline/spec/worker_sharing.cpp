#include "pipeline/spec/worker_sharing.hpp"

#include <algorithm>
#include <map>

namespace streamctl::pipeline {

bool keeps_state_in_memory(const NodeSpec& node) {
  return node.role == NodeRole::Operator && (node.type == "window" || node.type == "reduce");
}

bool holds_nothing_shared(const NodeSpec& node) {
  if (node.role == NodeRole::Source) return node.type == "generator" || node.type == "file";
  if (node.role == NodeRole::Sink) return node.type == "file" || node.type == "stdout";
  return true;
}

ChainTraits traits_of(const PipelineSpec& spec, const Chain& chain) {
  ChainTraits traits;
  for (std::size_t index : chain.nodes) {
    const NodeSpec& node = spec.nodes[index];
    if (node.role == NodeRole::Source && node.type == "stdin") traits.reads_stdin = true;
    if (!holds_nothing_shared(node)) traits.holds_shared = true;
    if (keeps_state_in_memory(node)) traits.stateful_nodes.push_back(node.name);
  }
  return traits;
}

bool slot_sharing_enabled(const PipelineSpec& spec) { return spec.root["slot_sharing"].value_or(true); }

namespace {

struct Sharing {
  bool alone = false;    // stdin, a port or a child, another host
  bool keepable = false; // a rescale may keep its process
};

Sharing sharing_of(const PipelineSpec& spec, const PhysicalPlan& plan, const Task& task,
                   const std::vector<std::string>& hosts) {
  Sharing s;
  auto id = static_cast<std::size_t>(task.id);
  if (id < hosts.size() && !hosts[id].empty()) s.alone = true;
  ChainTraits traits = traits_of(spec, plan.chains[static_cast<std::size_t>(task.chain)]);
  if (traits.reads_stdin || traits.holds_shared) s.alone = true;
  s.keepable = !traits.stateful_nodes.empty();
  return s;
}

} // namespace

std::vector<std::vector<int>> group_tasks_into_workers(const PipelineSpec& spec, const PhysicalPlan& plan,
                                                       const std::vector<int>& tasks,
                                                       const std::vector<std::string>& hosts) {
  std::vector<std::vector<int>> workers;
  bool sharing = slot_sharing_enabled(spec);
  // By subtask index: the processes that tasks of that index may still join, and whether
  // each already holds a task that a rescale may keep.
  struct Open {
    std::size_t worker;
    bool has_keepable;
  };
  std::map<int, std::vector<Open>> open;
  for (int id : tasks) {
    const Task& task = plan.tasks[static_cast<std::size_t>(id)];
    Sharing s = sharing_of(spec, plan, task, hosts);
    if (!sharing || s.alone) {
      workers.push_back({id});
      continue;
    }
    auto& candidates = open[task.subtask];
    auto fits = std::find_if(candidates.begin(), candidates.end(),
                             [&](const Open& o) { return !(s.keepable && o.has_keepable); });
    if (fits == candidates.end()) {
      candidates.push_back({workers.size(), s.keepable});
      workers.push_back({id});
      continue;
    }
    workers[fits->worker].push_back(id);
    fits->has_keepable = fits->has_keepable || s.keepable;
  }
  return workers;
}

} // namespace streamctl::pipeline
