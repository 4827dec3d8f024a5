#include "pipeline/runtime/worker_reuse.hpp"

#include <algorithm>
#include <set>
#include <string>
#include <tuple>

#include "pipeline/spec/worker_sharing.hpp"
#include "state/key_group.hpp"

namespace streamctl::runtime {

namespace {

struct TaskShape {
  pipeline::ChainTraits traits;
  state::KeyGroupRange key_groups;
};

TaskShape shape_of(const LoadedJob& job, const pipeline::Task& task) {
  const pipeline::Chain& chain = job.plan.chains[static_cast<std::size_t>(task.chain)];
  TaskShape shape;
  shape.traits = pipeline::traits_of(job.spec, chain);
  shape.key_groups = state::key_group_range(task.subtask, chain.parallelism,
                                            static_cast<std::uint32_t>(job.spec.max_parallelism));
  return shape;
}

bool share_a_node(const TaskShape& a, const TaskShape& b) {
  const auto& theirs = b.traits.stateful_nodes;
  return std::any_of(a.traits.stateful_nodes.begin(), a.traits.stateful_nodes.end(), [&](const std::string& name) {
    return std::find(theirs.begin(), theirs.end(), name) != theirs.end();
  });
}

unsigned overlap(state::KeyGroupRange a, state::KeyGroupRange b) {
  std::uint32_t first = std::max(a.first, b.first), end = std::min(a.end, b.end);
  return end > first ? end - first : 0;
}

} // namespace

std::vector<WorkerReuse> plan_worker_reuse(const LoadedJob& running, const LoadedJob& next) {
  // State moves between operators of the same key groups only.
  if (running.spec.max_parallelism != next.spec.max_parallelism) return {};
  std::vector<WorkerReuse> candidates;
  for (const auto& old_task : running.plan.tasks) {
    TaskShape from = shape_of(running, old_task);
    if (from.traits.reads_stdin || from.traits.holds_shared || from.traits.stateful_nodes.empty()) continue;
    for (const auto& new_task : next.plan.tasks) {
      TaskShape to = shape_of(next, new_task);
      if (to.traits.reads_stdin || !share_a_node(from, to)) continue;
      if (unsigned groups = overlap(from.key_groups, to.key_groups); groups > 0)
        candidates.push_back({old_task.id, new_task.id, groups});
    }
  }
  std::stable_sort(candidates.begin(), candidates.end(), [](const WorkerReuse& a, const WorkerReuse& b) {
    return std::tie(b.key_groups, a.old_task, a.new_task) < std::tie(a.key_groups, b.old_task, b.new_task);
  });
  std::vector<WorkerReuse> chosen;
  std::set<int> old_used, new_used;
  for (const auto& c : candidates) {
    if (old_used.count(c.old_task) || new_used.count(c.new_task)) continue;
    old_used.insert(c.old_task);
    new_used.insert(c.new_task);
    chosen.push_back(c);
  }
  return chosen;
}

} // namespace streamctl::runtime
