#include "pipeline/spec/graph_render.hpp"

#include <algorithm>
#include <sstream>

#include "state/json_writer.hpp"

namespace streamctl::pipeline {

namespace {

// Every edge of the logical graph, with how the plan carries it.
struct EdgeView {
  std::size_t from;
  std::size_t to;
  Partition partition;
  bool fused;
  int channels; // data channels between processes; 0 when fused
  bool late;    // carries the late records of a window (`late_output`)
};

std::vector<int> chain_of_nodes(const PipelineSpec& spec, const PhysicalPlan& plan) {
  std::vector<int> chain_of(spec.nodes.size(), -1);
  for (const auto& chain : plan.chains)
    for (std::size_t n : chain.nodes) chain_of[n] = chain.id;
  return chain_of;
}

std::vector<EdgeView> edge_views(const PipelineSpec& spec, const PhysicalPlan& plan) {
  auto chain_of = chain_of_nodes(spec, plan);
  std::vector<EdgeView> out;
  for (std::size_t to = 0; to < spec.nodes.size(); ++to) {
    const auto& inputs = spec.nodes[to].inputs;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      InputRef ref = resolve_input(spec, inputs[i]);
      std::size_t from = ref.node;
      EdgeView view{from, to, Partition::Forward, chain_of[from] == chain_of[to], 0,
                    ref.port == kLateOutput};
      for (const auto& e : plan.edges)
        if (e.from_node == from && e.to_node == to && e.input_index == static_cast<int>(i)) {
          view.partition = e.partition;
          int up = plan.chains[static_cast<std::size_t>(e.from_chain)].parallelism;
          int down = plan.chains[static_cast<std::size_t>(e.to_chain)].parallelism;
          for (int u = 0; u < up; ++u)
            for (int d = 0; d < down; ++d) view.channels += e.connects(u, d) ? 1 : 0;
        }
      out.push_back(view);
    }
  }
  return out;
}

using state::json_string;

// A dot string: quotes escaped, and "\n" kept as Graphviz's line break.
std::string dot_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string tasks_of(const PhysicalPlan& plan, const Chain& chain) {
  std::vector<int> ids;
  for (const auto& t : plan.tasks)
    if (t.chain == chain.id) ids.push_back(t.id);
  if (ids.size() == 1) return "task " + std::to_string(ids[0]);
  return "tasks " + std::to_string(ids.front()) + "-" + std::to_string(ids.back());
}

std::string render_text(const PipelineSpec& spec, const PhysicalPlan& plan) {
  std::ostringstream out;
  out << "pipeline " << spec.name << " (max_parallelism " << spec.max_parallelism << ")\n\n";
  out << "logical graph:\n";
  std::size_t width = 0;
  for (const auto& n : spec.nodes) width = std::max(width, n.name.size() + n.type.size() + 3);
  for (const auto& n : spec.nodes) {
    std::string label = n.name + " (" + n.type + ")";
    out << "  " << role_name(n.role) << std::string(9 - std::string(role_name(n.role)).size(), ' ') << label
        << std::string(width - label.size() + 2, ' ') << "parallelism " << spec.parallelism_of(n);
    if (!n.inputs.empty()) {
      out << "  <- ";
      for (std::size_t k = 0; k < n.inputs.size(); ++k) out << (k ? ", " : "") << n.inputs[k];
    }
    out << "\n";
  }
  out << "\nphysical plan: " << plan.chains.size() << " chain(s), " << plan.tasks.size()
      << " task(s), one worker process each\n";
  for (const auto& c : plan.chains)
    out << "  chain " << c.id << ": " << chain_label(spec, c) << "  parallelism " << c.parallelism << "  "
        << tasks_of(plan, c) << "\n";
  out << "\nedges:\n";
  for (const auto& e : edge_views(spec, plan)) {
    out << "  " << spec.nodes[e.from].name << (e.late ? " (late records)" : "") << " -> "
        << spec.nodes[e.to].name << ": ";
    if (e.fused) out << "forward, fused (in memory)\n";
    else out << partition_name(e.partition) << ", " << e.channels << " channel(s)\n";
  }
  out << "\nplacement: every task on this host\n";
  return out.str();
}

std::string render_dot(const PipelineSpec& spec, const PhysicalPlan& plan) {
  std::ostringstream out;
  out << "digraph " << dot_string(spec.name) << " {\n  rankdir=LR;\n  node [shape=box];\n";
  for (const auto& c : plan.chains) {
    out << "  subgraph cluster_chain" << c.id << " {\n    label=" << dot_string("chain " + std::to_string(c.id) + " x" + std::to_string(c.parallelism)) << ";\n";
    for (std::size_t n : c.nodes) {
      const auto& node = spec.nodes[n];
      out << "    " << dot_string(node.name) << " [label="
          << dot_string(node.name + "\\n" + node.type + " x" + std::to_string(spec.parallelism_of(node)))
          << (node.role == NodeRole::Operator ? "" : node.role == NodeRole::Source ? ", shape=invhouse" : ", shape=house")
          << "];\n";
    }
    out << "  }\n";
  }
  for (const auto& e : edge_views(spec, plan)) {
    out << "  " << dot_string(spec.nodes[e.from].name) << " -> " << dot_string(spec.nodes[e.to].name)
        << " [label="
        << dot_string(std::string(e.late ? "late, " : "") +
                      (e.fused ? "forward (fused)" : partition_name(e.partition)))
        << (e.fused ? "" : ", style=bold") << "];\n";
  }
  out << "}\n";
  return out.str();
}

std::string render_json(const PipelineSpec& spec, const PhysicalPlan& plan) {
  std::ostringstream out;
  out << "{\"name\":" << json_string(spec.name) << ",\"max_parallelism\":" << spec.max_parallelism
      << ",\"nodes\":[";
  for (std::size_t k = 0; k < spec.nodes.size(); ++k) {
    const auto& n = spec.nodes[k];
    out << (k ? "," : "") << "{\"name\":" << json_string(n.name) << ",\"role\":" << json_string(role_name(n.role))
        << ",\"type\":" << json_string(n.type) << ",\"parallelism\":" << spec.parallelism_of(n) << ",\"inputs\":[";
    for (std::size_t i = 0; i < n.inputs.size(); ++i) out << (i ? "," : "") << json_string(n.inputs[i]);
    out << "]}";
  }
  out << "],\"edges\":[";
  auto edges = edge_views(spec, plan);
  for (std::size_t k = 0; k < edges.size(); ++k) {
    const auto& e = edges[k];
    out << (k ? "," : "") << "{\"from\":" << json_string(spec.nodes[e.from].name)
        << ",\"to\":" << json_string(spec.nodes[e.to].name) << ",\"partition\":"
        << json_string(e.fused ? "forward" : partition_name(e.partition)) << ",\"fused\":" << (e.fused ? "true" : "false")
        << ",\"channels\":" << e.channels << ",\"late\":" << (e.late ? "true" : "false") << "}";
  }
  out << "],\"chains\":[";
  for (std::size_t k = 0; k < plan.chains.size(); ++k) {
    const auto& c = plan.chains[k];
    out << (k ? "," : "") << "{\"id\":" << c.id << ",\"parallelism\":" << c.parallelism << ",\"nodes\":[";
    for (std::size_t i = 0; i < c.nodes.size(); ++i) out << (i ? "," : "") << json_string(spec.nodes[c.nodes[i]].name);
    out << "]}";
  }
  out << "],\"tasks\":[";
  for (std::size_t k = 0; k < plan.tasks.size(); ++k) {
    const auto& t = plan.tasks[k];
    out << (k ? "," : "") << "{\"id\":" << t.id << ",\"chain\":" << t.chain << ",\"subtask\":" << t.subtask
        << ",\"host\":\"localhost\"}";
  }
  out << "]}\n";
  return out.str();
}

} // namespace

std::string render_graph(const PipelineSpec& spec, const PhysicalPlan& plan, GraphFormat format) {
  switch (format) {
  case GraphFormat::Text: return render_text(spec, plan);
  case GraphFormat::Dot: return render_dot(spec, plan);
  case GraphFormat::Json: return render_json(spec, plan);
  }
  return {};
}

} // namespace streamctl::pipeline
