#include "pipeline/spec/plan.hpp"

#include <map>
#include <unordered_map>

namespace streamctl::pipeline {

const Task* PhysicalPlan::task_of(int chain, int subtask) const {
  for (const auto& t : tasks)
    if (t.chain == chain && t.subtask == subtask) return &t;
  return nullptr;
}

std::vector<const ChainEdge*> PhysicalPlan::edges_into(int chain) const {
  std::vector<const ChainEdge*> out;
  for (const auto& e : edges)
    if (e.to_chain == chain) out.push_back(&e);
  return out;
}

std::vector<const ChainEdge*> PhysicalPlan::edges_out_of(int chain) const {
  std::vector<const ChainEdge*> out;
  for (const auto& e : edges)
    if (e.from_chain == chain) out.push_back(&e);
  return out;
}

int PhysicalPlan::input_channel_count(int chain, int subtask) const {
  int count = 0;
  for (const auto* e : edges_into(chain)) {
    int upstream = chains[static_cast<std::size_t>(e->from_chain)].parallelism;
    for (int u = 0; u < upstream; ++u)
      if (e->connects(u, subtask)) ++count;
  }
  return count;
}

InputRef resolve_input(const PipelineSpec& spec, const std::string& name) {
  for (std::size_t k = 0; k < spec.nodes.size(); ++k)
    if (spec.nodes[k].name == name) return InputRef{k, kMainOutput};
  for (std::size_t k = 0; k < spec.nodes.size(); ++k)
    if (spec.nodes[k].config["late_output"].value_or(std::string()) == name)
      return InputRef{k, kLateOutput};
  return InputRef{spec.nodes.size(), kMainOutput};
}

namespace {

Partition default_partition(const PipelineSpec& spec, const NodeSpec& from, const NodeSpec& to) {
  if (to.partition) return *to.partition;
  return spec.parallelism_of(from) == spec.parallelism_of(to) ? Partition::Forward
                                                               : Partition::Rebalance;
}

Partition edge_partition(const PipelineSpec& spec, const NodeSpec& from, const NodeSpec& to,
                         std::size_t input_index) {
  // A join meets both sides by key: both come by key (hash), or the right side goes to every
  // subtask and the left stays where it is (broadcast).
  if (to.type == "join") {
    if (to.config["strategy"].value_or(std::string("hash")) != "broadcast") return Partition::Key;
    return input_index == 1 ? Partition::Broadcast : default_partition(spec, from, to);
  }
  // A keyed node's subtask owns a range of key groups: its records must come by key.
  if (to.config.contains("key")) return Partition::Key;
  return default_partition(spec, from, to);
}

} // namespace

PhysicalPlan plan_job(const PipelineSpec& spec) {
  const std::size_t n = spec.nodes.size();
  // resolve_input once per name: its linear search per input made planning quadratic, seconds
  // for a pipeline of 20,000 nodes (refused by the worker limit, but only after planning).
  std::unordered_map<std::string, InputRef> refs;
  for (std::size_t k = n; k-- > 0;) {
    if (auto late = spec.nodes[k].config["late_output"].value<std::string>()) refs[*late] = InputRef{k, kLateOutput};
  }
  for (std::size_t k = n; k-- > 0;) refs[spec.nodes[k].name] = InputRef{k, kMainOutput};
  auto resolve = [&](const std::string& name) {
    auto it = refs.find(name);
    return it == refs.end() ? InputRef{n, kMainOutput} : it->second;
  };
  std::vector<std::vector<std::size_t>> consumers(n);
  for (std::size_t k = 0; k < n; ++k)
    for (const auto& input : spec.nodes[k].inputs)
      consumers[resolve(input).node].push_back(k);

  // A node continues its input's chain when the edge between them is a private forward edge
  // from the input's main output (a late output always crosses to another chain, so that a
  // chain has one tail whose outputs the router sends).
  auto chains_onto_input = [&](std::size_t k) {
    const NodeSpec& node = spec.nodes[k];
    if (node.inputs.size() != 1) return false;
    InputRef up = resolve(node.inputs[0]);
    if (up.port != kMainOutput || consumers[up.node].size() != 1 ||
        spec.parallelism_of(spec.nodes[up.node]) != spec.parallelism_of(node))
      return false;
    Partition partition = edge_partition(spec, spec.nodes[up.node], node, 0);
    // Between two single subtasks, partitioning by key sends everything to subtask 0, which
    // owns every key group: a forward edge that may be fused.
    return partition == Partition::Forward ||
           (partition == Partition::Key && spec.parallelism_of(node) == 1);
  };

  PhysicalPlan plan;
  std::vector<int> chain_of(n, -1);
  // Nodes are ordered sources, operators, sinks, and validation rejects cycles; walking heads
  // in topological order keeps chain ids stable for a given file.
  std::vector<std::size_t> order;
  std::vector<int> pending(n, 0);
  for (std::size_t k = 0; k < n; ++k) pending[k] = static_cast<int>(spec.nodes[k].inputs.size());
  for (std::size_t k = 0; k < n; ++k)
    if (pending[k] == 0) order.push_back(k);
  for (std::size_t at = 0; at < order.size(); ++at)
    for (std::size_t c : consumers[order[at]])
      if (--pending[c] == 0) order.push_back(c);

  for (std::size_t k : order) {
    if (chains_onto_input(k)) {
      int c = chain_of[resolve(spec.nodes[k].inputs[0]).node];
      chain_of[k] = c;
      plan.chains[static_cast<std::size_t>(c)].nodes.push_back(k);
    } else {
      Chain chain;
      chain.id = static_cast<int>(plan.chains.size());
      chain.nodes.push_back(k);
      chain.parallelism = spec.parallelism_of(spec.nodes[k]);
      chain_of[k] = chain.id;
      plan.chains.push_back(chain);
    }
  }

  for (std::size_t k : order) {
    const NodeSpec& node = spec.nodes[k];
    for (std::size_t i = 0; i < node.inputs.size(); ++i) {
      InputRef ref = resolve(node.inputs[i]);
      std::size_t up = ref.node;
      if (chain_of[up] == chain_of[k]) continue;
      ChainEdge e;
      e.from_port = ref.port;
      e.id = static_cast<int>(plan.edges.size());
      e.from_chain = chain_of[up];
      e.to_chain = chain_of[k];
      e.from_node = up;
      e.to_node = k;
      e.input_index = static_cast<int>(i);
      e.partition = edge_partition(spec, spec.nodes[up], node, i);
      plan.edges.push_back(e);
    }
  }

  for (const auto& chain : plan.chains)
    for (int s = 0; s < chain.parallelism; ++s)
      plan.tasks.push_back(Task{static_cast<int>(plan.tasks.size()), chain.id, s});
  return plan;
}

std::string chain_label(const PipelineSpec& spec, const Chain& chain) {
  std::string label;
  for (std::size_t k : chain.nodes) {
    if (!label.empty()) label += " -> ";
    label += spec.nodes[k].name;
  }
  return label;
}

} // namespace streamctl::pipeline
