#include "pipeline/spec/worker_limits.hpp"

#include <algorithm>
#include <optional>
#include <utility>

namespace streamctl::pipeline {

namespace {

SourcePos pos_of(const toml::node& value, const PipelineSpec& spec) {
  const toml::source_region& r = value.source();
  return SourcePos{r.path ? *r.path : spec.file.string(), r.begin.line, r.begin.column};
}

// Where the parallelism of `chain` is set: a node's own key, else the pipeline's default (in
// the file, or a -p/--set override), else nowhere (0:0).
std::optional<SourcePos> parallelism_source(const PipelineSpec& spec, const Chain& chain) {
  for (std::size_t k : chain.nodes)
    if (const toml::node* v = spec.nodes[k].config.get("parallelism");
        v && v->source().begin.line > 0)
      return pos_of(*v, spec);
  if (const toml::node* v = spec.root.get("parallelism"); v && v->source().begin.line > 0)
    return pos_of(*v, spec);
  return std::nullopt;
}

// The place a limit of `limit` workers is crossed, and what to say about it.
std::pair<SourcePos, std::string> cause(const PipelineSpec& spec, const PhysicalPlan& plan,
                                        std::size_t limit) {
  const Chain* widest = nullptr;
  for (const auto& c : plan.chains)
    if (!widest || c.parallelism > widest->parallelism) widest = &c;
  if (widest && widest->parallelism > 1) {
    std::string what = "chain '" + chain_label(spec, *widest) + "' has parallelism " +
                       std::to_string(widest->parallelism);
    if (auto where = parallelism_source(spec, *widest)) return {*where, what};
    return {spec.nodes[widest->nodes.front()].where, what};
  }
  std::size_t count = 0;
  for (const auto& c : plan.chains) {
    count += static_cast<std::size_t>(c.parallelism);
    if (count > limit)
      return {spec.nodes[c.nodes.front()].where,
              std::to_string(plan.chains.size()) + " chains of nodes that do not fuse; " +
                  std::string(role_name(spec.nodes[c.nodes.front()].role)) + " '" +
                  spec.nodes[c.nodes.front()].name + "' starts worker " + std::to_string(count)};
  }
  return {SourcePos{spec.file.string(), 1, 1}, std::to_string(plan.chains.size()) + " chains"};
}

} // namespace

Diagnostics check_worker_limits(const PipelineSpec& spec, const PhysicalPlan& plan,
                                const WorkerLimits& limits) {
  Diagnostics out;
  const std::size_t needed = plan.tasks.size();
  if (needed > limits.per_job) {
    auto [where, what] = cause(spec, plan, limits.per_job);
    out.add(where, "the job needs " + std::to_string(needed) +
                       " worker processes, above the limit of " + std::to_string(limits.per_job) +
                       " per job (" + what +
                       "); raise the limit with --max-workers N, or lower the parallelism");
  }
  if (needed + limits.running_elsewhere > limits.per_host) {
    std::size_t room =
        limits.per_host > limits.running_elsewhere ? limits.per_host - limits.running_elsewhere : 0;
    auto [where, what] = cause(spec, plan, room);
    std::string others =
        limits.running_elsewhere == 0
            ? std::string()
            : " and other jobs run " + std::to_string(limits.running_elsewhere) + " here";
    std::string origin = limits.per_host_origin.empty() ? "" : limits.per_host_origin + "; ";
    out.add(where, "the job needs " + std::to_string(needed) + " worker processes" + others +
                       ", above the limit of " + std::to_string(limits.per_host) + " per host (" +
                       origin + what + "); raise the limit with --max-host-workers N");
  }
  return out;
}

} // namespace streamctl::pipeline
