#include "pipeline/runtime/rescale_plan.hpp"

#include <optional>

#include "operators/connectors/registry.hpp"
#include "pipeline/runtime/host_limits.hpp"

namespace streamctl::runtime {

Result<LoadedJob> plan_rescale(const LoadedJob& job, const std::string& changes,
                               const pipeline::WorkerLimits& limits) {
  std::vector<std::string> all = job.overrides;
  for (std::size_t start = 0; start < changes.size();) {
    auto end = changes.find('\n', start);
    if (end == std::string::npos) end = changes.size();
    std::string line = changes.substr(start, end - start);
    start = end + 1;
    auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string name = line.substr(0, eq);
    if (name == "parallelism") {
      all.push_back(line);
      continue;
    }
    const pipeline::NodeSpec* node = nullptr;
    for (const auto& n : job.spec.nodes)
      if (n.name == name) node = &n;
    if (!node) return fail("the job has no node '" + name + "'");
    all.push_back(std::string(pipeline::role_name(node->role)) + "s." + name + ".parallelism" +
                  line.substr(eq));
  }
  std::optional<LoadedJob> next;
  try {
    operators::Registry registry;
    connectors::register_all_types(registry);
    next = load_job_text(job.text, job.spec.file.string(), job.spec.base_dir, all, registry, job.variables);
    enforce_worker_limits(*next, limits);
  } catch (const Error& e) {
    return fail(std::string("the new parallelism does not make a valid job:\n") + e.what());
  }
  for (const auto& node : next->spec.nodes)
    if (next->spec.parallelism_of(node) > next->spec.max_parallelism)
      return fail("node '" + node.name + "': parallelism " +
                  std::to_string(next->spec.parallelism_of(node)) + " is above max_parallelism " +
                  std::to_string(next->spec.max_parallelism));
  return std::move(*next);
}

} // namespace streamctl::runtime
