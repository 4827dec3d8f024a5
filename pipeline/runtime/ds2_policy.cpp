#include "pipeline/runtime/ds2_policy.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <unordered_map>

namespace streamctl::runtime {

namespace {

// The band of required instances in which a parallelism is kept (see the header).
constexpr double kHysteresis = 0.10;

std::string fixed2(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

// One subtask's observations, summed.
struct Sums {
  double in = 0, out = 0, busy_s = 0, length_s = 0;
};

// Each node's inputs: the upstream node (spec.nodes.size() when unknown) and the edge's
// partitioning, Forward inside a chain. One pass over names and edges: resolve_input per input
// would be quadratic in the number of nodes.
struct Input {
  std::size_t node = 0;
  pipeline::Partition partition = pipeline::Partition::Forward;
};

std::vector<std::vector<Input>> inputs_of(const pipeline::PipelineSpec& spec,
                                          const pipeline::PhysicalPlan& plan) {
  const std::size_t n = spec.nodes.size();
  std::unordered_map<std::string, std::size_t> refs;
  for (std::size_t k = n; k-- > 0;)
    if (auto late = spec.nodes[k].config["late_output"].value<std::string>()) refs[*late] = k;
  for (std::size_t k = n; k-- > 0;)
    refs[spec.nodes[k].name] = k;
  std::vector<std::vector<Input>> inputs(n);
  for (std::size_t k = 0; k < n; ++k)
    for (const auto& name : spec.nodes[k].inputs) {
      auto it = refs.find(name);
      inputs[k].push_back(Input{it == refs.end() ? n : it->second});
    }
  for (const auto& e : plan.edges)
    if (e.to_node < n && static_cast<std::size_t>(e.input_index) < inputs[e.to_node].size())
      inputs[e.to_node][static_cast<std::size_t>(e.input_index)].partition = e.partition;
  return inputs;
}

// The parallelism a chain should have for `required` instances, before clamping; `current`
// when the need is within the hysteresis band.
int with_hysteresis(double required, int current) {
  if (required > (1 + kHysteresis) * current) return static_cast<int>(std::ceil(required));
  if ((1 + kHysteresis) * required <= current - 1)
    return std::max(1, static_cast<int>(std::ceil(required)));
  return current;
}

} // namespace

Ds2Observation observation_of(const SubtaskMetrics& m) {
  Ds2Observation o;
  o.node = m.node;
  o.subtask = m.subtask;
  o.interval_s = 1;
  o.records_in = m.records_in_per_s;
  o.records_out = m.records_out_per_s;
  o.busy = m.busy;
  return o;
}

std::optional<double> configured_source_rate(const pipeline::NodeSpec& node) {
  if (node.role != pipeline::NodeRole::Source || node.type != "generator") return std::nullopt;
  auto rate = node.config["rate"].value<double>();
  if (rate && *rate > 0) return rate;
  return std::nullopt;
}

std::string Ds2NodeDecision::summary() const {
  auto rate = [](double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.0f/s", v);
    return std::string(buf);
  };
  std::string line = node + ": " + std::to_string(current) + " -> " + std::to_string(optimal);
  line += ", target in " + (target_in ? rate(*target_in) : std::string("unknown"));
  line += ", true rate " + rate(true_in) + " per instance";
  line += ", selectivity " + fixed2(selectivity);
  return line + " (" + reason + ")";
}

std::vector<Ds2NodeDecision> Ds2Decision::changes() const {
  std::vector<Ds2NodeDecision> out;
  for (const auto& row : nodes)
    if (row.optimal != row.current) out.push_back(row);
  return out;
}

std::string Ds2Decision::rescale_request() const {
  std::string out;
  for (const auto& row : changes())
    out += row.node + "=" + std::to_string(row.optimal) + "\n";
  return out;
}

Ds2Decision decide_ds2(const pipeline::PipelineSpec& spec, const pipeline::PhysicalPlan& plan,
                       const std::vector<Ds2Observation>& observations,
                       const AutoscaleSettings& settings,
                       const std::map<std::string, double>& source_rates) {
  const std::size_t n = spec.nodes.size();
  const double u = settings.target_utilization;
  std::unordered_map<std::string, std::size_t> index;
  for (std::size_t k = 0; k < n; ++k)
    index[spec.nodes[k].name] = k;

  std::vector<std::map<int, Sums>> sums(n);
  for (const auto& o : observations) {
    auto it = index.find(o.node);
    if (it == index.end() || !(o.interval_s > 0)) continue; // a node of another version of the job
    Sums& s = sums[it->second][o.subtask];
    s.in += o.records_in;
    s.out += o.records_out;
    s.busy_s += std::clamp(o.busy, 0.0, 1.0) * o.interval_s;
    s.length_s += o.interval_s;
  }

  const auto inputs = inputs_of(spec, plan);
  Ds2Decision decision;
  decision.nodes.resize(n);
  std::vector<int> chain_of(n, 0);
  for (const auto& chain : plan.chains)
    for (std::size_t k : chain.nodes)
      chain_of[k] = chain.id;
  for (std::size_t k = 0; k < n; ++k) {
    Ds2NodeDecision& row = decision.nodes[k];
    row.node = spec.nodes[k].name;
    row.chain = chain_of[k];
    row.current = plan.chains[static_cast<std::size_t>(row.chain)].parallelism;
    row.optimal = row.current;
    for (const auto& [subtask, s] : sums[k]) {
      (void)subtask;
      row.observed_in += s.in / s.length_s;
      row.observed_out += s.out / s.length_s;
      row.busy += s.busy_s / s.length_s;
      ++row.subtasks_observed;
    }
  }

  auto source_rate = [&](std::size_t k) -> std::optional<double> {
    if (auto it = source_rates.find(spec.nodes[k].name); it != source_rates.end())
      return it->second;
    return configured_source_rate(spec.nodes[k]);
  };

  // Chains are numbered in topological order of their heads, and a head's inputs belong to
  // earlier chains: walking chains in order meets every upstream first.
  for (const auto& chain : plan.chains) {
    // Nodes of a chain share the task's busy time; all report it, so take the largest sum.
    double busy = 0;
    for (std::size_t k : chain.nodes)
      busy = std::max(busy, decision.nodes[k].busy);

    std::optional<double> chain_required;
    std::string chain_gap; // why a node could not be sized, for a chain that has no figure
    bool has_source = false, source_rate_known = false;
    std::string pinned;
    for (std::size_t k : chain.nodes) {
      const pipeline::NodeSpec& node = spec.nodes[k];
      Ds2NodeDecision& row = decision.nodes[k];
      row.busy = busy;
      row.true_in = busy > 0 ? row.observed_in / busy : 0;
      row.true_out = busy > 0 ? row.observed_out / busy : 0;
      if (node.one_subtask) pinned = node.name;

      if (node.role == pipeline::NodeRole::Source) {
        has_source = true;
        auto rate = source_rate(k);
        source_rate_known = rate.has_value();
        row.selectivity = 1;
        if (rate)
          row.target_out = *rate;
        else if (row.subtasks_observed > 0)
          row.target_out = row.observed_out;
        if (!rate) {
          row.reason = "source without a configured rate: its observed rate is the demand";
        } else if (row.subtasks_observed == 0) {
          row.reason = "no observations";
        } else if (!(busy > 0) || !(row.observed_out > 0)) {
          row.reason = "no busy time yet";
        } else {
          row.required = *rate / (row.true_out * u);
        }
      } else {
        // Target input: spread inputs divide among the instances, broadcast ones load each.
        double spread = 0, broadcast = 0;
        bool known = true;
        std::string unknown_input;
        for (std::size_t i = 0; i < node.inputs.size(); ++i) {
          std::size_t up = inputs[k][i].node;
          if (up >= n || !decision.nodes[up].target_out) {
            known = false;
            if (unknown_input.empty()) unknown_input = node.inputs[i];
            continue;
          }
          double t = *decision.nodes[up].target_out;
          if (inputs[k][i].partition == pipeline::Partition::Broadcast)
            broadcast += t;
          else
            spread += t;
        }
        // Records the node handles in all: each broadcast record once per instance.
        double handled = spread + broadcast * row.current;
        if (known) row.target_in = handled;
        if (row.observed_in > 0) row.selectivity = row.observed_out / row.observed_in;

        if (row.subtasks_observed == 0) {
          row.reason = "no observations";
        } else if (!known) {
          row.reason = "no target input: upstream '" + unknown_input + "' has no target output";
        } else if (!(busy > 0)) {
          row.reason = "no busy time yet";
        } else if (!(row.observed_in > 0)) {
          row.reason = "no records in";
        } else {
          double capacity = row.true_in * u; // records per second one instance should handle
          if (broadcast >= capacity)
            row.reason = "its broadcast input alone (" + fixed2(broadcast) +
                         "/s) exceeds one instance's capacity at target utilization (" +
                         fixed2(capacity) + "/s): no parallelism is enough";
          else
            row.required = spread / (capacity - broadcast);
        }
        if (node.role == pipeline::NodeRole::Sink)
          row.target_out = 0.0;
        else if (known && handled == 0)
          row.target_out = 0.0;
        else if (known && row.observed_in > 0)
          row.target_out = row.selectivity * handled;
      }
      if (row.required)
        chain_required = std::max(chain_required.value_or(0.0), *row.required);
      else if (chain_gap.empty())
        chain_gap = row.reason;
    }

    // One parallelism for the whole chain.
    const int current = chain.parallelism;
    int optimal = current;
    bool decided = false;
    std::string reason;
    std::string label =
        chain.nodes.size() > 1 ? " (chain " + pipeline::chain_label(spec, chain) + ")" : "";
    if (!pinned.empty()) {
      decided = true;
      reason = "'" + pinned + "' runs with parallelism 1 (its type has one subtask)" + label;
    } else if (has_source && !source_rate_known) {
      decided = true;
      reason = chain_gap + label;
    } else if (!chain_required) {
      reason = chain_gap + label;
    } else {
      decided = true;
      double x = *chain_required;
      int sized = with_hysteresis(x, current);
      int wanted = has_source ? std::max(sized, current) : sized;
      optimal = std::clamp(wanted, settings.min_parallelism, settings.max_parallelism);
      reason = "needs " + fixed2(x) + " instances at " + fixed2(u) + " utilization" + label;
      if (sized < current && has_source)
        reason += ": a source is not shrunk, kept";
      else if (sized == current && std::ceil(x) > current)
        reason += ": within 10% of the current capacity, kept";
      else if (sized == current && std::ceil(x) < current)
        reason += ": one instance fewer would leave less than 10% to spare, kept";
      else if (sized == current)
        reason += ": kept";
      if (optimal > wanted)
        reason += ": clamped to min_parallelism " + std::to_string(optimal);
      else if (optimal < wanted)
        reason += ": clamped to max_parallelism " + std::to_string(optimal);
    }
    for (std::size_t k : chain.nodes) {
      Ds2NodeDecision& row = decision.nodes[k];
      row.optimal = optimal;
      row.decided = decided;
      if (decided || row.reason.empty()) row.reason = reason;
    }
  }
  return decision;
}

} // namespace streamctl::runtime
