#include "pipeline/spec/graph_render.hpp"

#include <algorithm>
#include <set>
#include <sstream>
#include <string>

#include "pipeline/spec/worker_sharing.hpp"
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
  std::size_t input_index; // position of `from` in the inputs of `to`
};

std::string json_list(const std::set<std::string>& names) {
  std::string out = "[";
  for (const auto& name : names) {
    if (out.size() > 1) out += ',';
    out += state::json_string(name);
  }
  return out + "]";
}

// The fields an edge carries (projection.hpp): null for every field, {"all_but": [...]} for
// every field but some, else a sorted list.
std::string fields_json(const FieldSet& fields) {
  if (fields.every_field()) return "null";
  if (fields.all) return "{\"all_but\":" + json_list(fields.except) + "}";
  return json_list(fields.names);
}

std::string fields_text(const FieldSet& fields) {
  auto list = [](const std::set<std::string>& names) {
    std::string out;
    for (const auto& name : names) out += (out.empty() ? "" : ", ") + name;
    return out;
  };
  if (fields.every_field()) return "all fields";
  if (fields.all) return "all fields but " + list(fields.except);
  if (fields.names.empty()) return "no fields";
  return "fields " + list(fields.names);
}

// Whether the senders of the edge combine records into partial aggregates (combining.hpp).
bool combined(const PipelineSpec& spec, const EdgeView& e) {
  return !e.fused && e.partition == Partition::Key && spec.combines_into(e.to);
}

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
                    ref.port == kLateOutput, i};
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

// The worker processes a run starts (worker_sharing.hpp): tasks placed on other hosts, or on
// hosts not yet known, run alone.
std::vector<std::vector<int>> worker_processes(const PipelineSpec& spec, const PhysicalPlan& plan,
                                               const PlacementPreview& pp) {
  std::vector<int> ids;
  for (const auto& t : plan.tasks) ids.push_back(t.id);
  std::vector<std::string> hosts;
  if (pp.cluster.launcher != LauncherKind::Local)
    hosts = pp.placement ? pp.placement->task_hosts : std::vector<std::string>(plan.tasks.size(), "?");
  return group_tasks_into_workers(spec, plan, ids, hosts);
}

std::string tasks_of(const PhysicalPlan& plan, const Chain& chain) {
  std::vector<int> ids;
  for (const auto& t : plan.tasks)
    if (t.chain == chain.id) ids.push_back(t.id);
  if (ids.size() == 1) return "task " + std::to_string(ids[0]);
  return "tasks " + std::to_string(ids.front()) + "-" + std::to_string(ids.back());
}


// Placement, as each format shows it.
bool has_hosts(const PlacementPreview& pp) { return pp.cluster.launcher != LauncherKind::Local; }

bool spread_at_run_time(const PlacementPreview& pp, const ChainPlacement& c) {
  return pp.cluster.launcher == LauncherKind::Slurm && c.site == ChainSite::Spread;
}

std::vector<const Task*> tasks_of_chain(const PhysicalPlan& plan, const Chain& chain) {
  std::vector<const Task*> out;
  for (const auto& t : plan.tasks)
    if (t.chain == chain.id) out.push_back(&t);
  return out;
}

std::string host_label(const std::string& host) { return host.empty() ? "the coordinator's host" : host; }

// "worker1 x2, worker2 x1", hosts in the order of their first task.
std::string hosts_of_chain(const PhysicalPlan& plan, const Chain& chain, const Placement& placement) {
  std::vector<std::pair<std::string, int>> counts;
  for (const Task* t : tasks_of_chain(plan, chain)) {
    const std::string& h = placement.host_of(t->id);
    auto it = std::find_if(counts.begin(), counts.end(), [&](const auto& c) { return c.first == h; });
    if (it == counts.end()) counts.emplace_back(h, 1);
    else ++it->second;
  }
  std::string out;
  for (const auto& [h, n] : counts) out += (out.empty() ? "" : ", ") + host_label(h) + " x" + std::to_string(n);
  return out;
}

std::string chain_site_text(const PlacementPreview& pp, const PhysicalPlan& plan, const Chain& chain) {
  const Placement& placement = *pp.placement;
  const ChainPlacement& c = placement.chains[static_cast<std::size_t>(chain.id)];
  switch (c.site) {
  case ChainSite::Coordinator: return "on the coordinator's host (" + c.reason + ")";
  case ChainSite::Pinned: return "on " + c.host + " (" + c.reason + ")";
  case ChainSite::Spread: break;
  }
  if (spread_at_run_time(pp, c)) return "spread over the nodes of the Slurm allocation at run time";
  // "spread: w1 tasks 1, 4; w2 tasks 2, 5", hosts in the order of their first task.
  std::vector<std::pair<std::string, std::vector<int>>> by_host;
  for (const Task* t : tasks_of_chain(plan, chain)) {
    const std::string& h = placement.host_of(t->id);
    auto it = std::find_if(by_host.begin(), by_host.end(), [&](const auto& e) { return e.first == h; });
    if (it == by_host.end()) by_host.emplace_back(h, std::vector<int>{t->id});
    else it->second.push_back(t->id);
  }
  std::string out = "spread:";
  for (std::size_t k = 0; k < by_host.size(); ++k) {
    const auto& [host, ids] = by_host[k];
    out += (k ? "; " : " ") + host + (ids.size() == 1 ? " task " : " tasks ");
    for (std::size_t i = 0; i < ids.size(); ++i) out += (i ? ", " : "") + std::to_string(ids[i]);
  }
  return out;
}

std::string indented(const std::string& text, const std::string& indent) {
  std::string out = indent;
  for (char c : text) {
    out += c;
    if (c == '\n') out += indent;
  }
  return out + "\n";
}

std::string placement_text(const PipelineSpec& spec, const PhysicalPlan& plan, const PlacementPreview& pp) {
  std::ostringstream out;
  if (!has_hosts(pp)) {
    out << "\nplacement: every task on this host\n";
    if (!pp.placement) out << indented("cannot place the job: " + pp.placement.error(), "  ");
    return out.str();
  }
  const ClusterSpec& cl = pp.cluster;
  out << "\nplacement: launcher \"" << launcher_name(cl.launcher) << "\", checkpoint storage \""
      << storage_name(cl.storage) << "\", links between hosts "
      << (cl.encrypt ? "encrypted (CurveZMQ)" : "NOT encrypted (encrypt = false)") << "\n";
  if (cl.launcher == LauncherKind::Slurm) {
    out << "  hosts: the nodes of the Slurm allocation, known at run time\n";
  } else {
    out << "  hosts:\n";
    std::size_t width = 0;
    for (const auto& h : pp.hosts) width = std::max(width, h.name.size());
    for (const auto& h : pp.hosts) {
      bool assumed = std::find(pp.assumed.begin(), pp.assumed.end(), h.name) != pp.assumed.end();
      int used = 0;
      if (pp.placement)
        used = static_cast<int>(std::count(pp.placement->task_hosts.begin(), pp.placement->task_hosts.end(), h.name));
      out << "    " << h.name << std::string(width - h.name.size() + 2, ' ');
      if (assumed)
        out << used << " task(s); slots not given: its core count, read at run time (placed here as if it had enough)\n";
      else
        out << used << " task(s) of " << h.slots << " slot(s)\n";
    }
  }
  if (!pp.placement) {
    out << indented("cannot place the job: " + pp.placement.error(), "  ");
    return out.str();
  }
  for (const auto& c : plan.chains)
    out << "  chain " << c.id << " (" << chain_label(spec, c) << "): " << chain_site_text(pp, plan, c) << "\n";
  auto on_coordinator = std::count(pp.placement->task_hosts.begin(), pp.placement->task_hosts.end(), "");
  out << "  on the coordinator's host: " << on_coordinator << " task(s), taking no slot of the hosts\n";
  return out.str();
}

// The placement line of a chain's box in dot; empty without hosts.
std::string placement_dot_label(const PlacementPreview& pp, const PhysicalPlan& plan, const Chain& chain) {
  if (!has_hosts(pp) || !pp.placement) return "";
  const ChainPlacement& c = pp.placement->chains[static_cast<std::size_t>(chain.id)];
  if (c.site == ChainSite::Coordinator) return "\\non the coordinator's host";
  if (spread_at_run_time(pp, c)) return "\\non the Slurm allocation";
  return "\\non " + hosts_of_chain(plan, chain, *pp.placement);
}

std::string render_text(const PipelineSpec& spec, const PhysicalPlan& plan, const PlacementPreview& pp) {
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
  auto workers = worker_processes(spec, plan, pp);
  out << "\nphysical plan: " << plan.chains.size() << " chain(s), " << plan.tasks.size() << " task(s) in "
      << workers.size() << " worker process(es)\n";
  for (const auto& c : plan.chains)
    out << "  chain " << c.id << ": " << chain_label(spec, c) << "  parallelism " << c.parallelism << "  "
        << tasks_of(plan, c) << "\n";
  out << "  worker processes, by their tasks:";
  for (const auto& group : workers) {
    out << " [";
    for (std::size_t k = 0; k < group.size(); ++k) out << (k ? " " : "") << group[k];
    out << "]";
  }
  out << "\n\nedges:\n";
  for (const auto& e : edge_views(spec, plan)) {
    out << "  " << spec.nodes[e.from].name << (e.late ? " (late records)" : "") << " -> "
        << spec.nodes[e.to].name << ": ";
    if (e.fused) out << "forward, fused (in memory)";
    else out << partition_name(e.partition) << (combined(spec, e) ? ", combined before sending" : "") << ", "
             << e.channels << " channel(s)";
    out << "; " << fields_text(spec.fields_read(e.to, e.input_index)) << "\n";
  }
  out << placement_text(spec, plan, pp);
  return out.str();
}

std::string render_dot(const PipelineSpec& spec, const PhysicalPlan& plan, const PlacementPreview& pp) {
  std::ostringstream out;
  out << "digraph " << dot_string(spec.name) << " {\n  rankdir=LR;\n  node [shape=box];\n";
  for (const auto& c : plan.chains) {
    out << "  subgraph cluster_chain" << c.id << " {\n    label=" << dot_string("chain " + std::to_string(c.id) + " x" + std::to_string(c.parallelism) +
                                    placement_dot_label(pp, plan, c)) << ";\n";
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

// "localhost" for the coordinator's host (as `status` says), null where it is not known yet.
std::string task_host_json(const PlacementPreview& pp, const Task& t) {
  if (!pp.placement) return "null";
  if (spread_at_run_time(pp, pp.placement->chains[static_cast<std::size_t>(t.chain)])) return "null";
  const std::string& h = pp.placement->host_of(t.id);
  return json_string(h.empty() ? "localhost" : h);
}

std::string render_json(const PipelineSpec& spec, const PhysicalPlan& plan, const PlacementPreview& pp) {
  std::ostringstream out;
  out << "{\"name\":" << json_string(spec.name) << ",\"max_parallelism\":" << spec.max_parallelism
      << ",\"nodes\":[";
  for (std::size_t k = 0; k < spec.nodes.size(); ++k) {
    const auto& n = spec.nodes[k];
    out << (k ? "," : "") << "{\"name\":" << json_string(n.name) << ",\"role\":" << json_string(role_name(n.role))
        << ",\"type\":" << json_string(n.type) << ",\"parallelism\":" << spec.parallelism_of(n) << ",\"inputs\":[";
    for (std::size_t i = 0; i < n.inputs.size(); ++i) out << (i ? "," : "") << json_string(n.inputs[i]);
    out << "]";
    if (n.role == NodeRole::Source) out << ",\"fields\":" << fields_json(spec.fields_emitted(k));
    out << "}";
  }
  out << "],\"edges\":[";
  auto edges = edge_views(spec, plan);
  for (std::size_t k = 0; k < edges.size(); ++k) {
    const auto& e = edges[k];
    out << (k ? "," : "") << "{\"from\":" << json_string(spec.nodes[e.from].name)
        << ",\"to\":" << json_string(spec.nodes[e.to].name) << ",\"partition\":"
        << json_string(e.fused ? "forward" : partition_name(e.partition)) << ",\"fused\":" << (e.fused ? "true" : "false")
        << ",\"combined\":" << (combined(spec, e) ? "true" : "false")
        << ",\"channels\":" << e.channels << ",\"late\":" << (e.late ? "true" : "false")
        << ",\"fields\":" << fields_json(spec.fields_read(e.to, e.input_index)) << "}";
  }
  out << "],\"chains\":[";
  for (std::size_t k = 0; k < plan.chains.size(); ++k) {
    const auto& c = plan.chains[k];
    out << (k ? "," : "") << "{\"id\":" << c.id << ",\"parallelism\":" << c.parallelism << ",\"nodes\":[";
    for (std::size_t i = 0; i < c.nodes.size(); ++i) out << (i ? "," : "") << json_string(spec.nodes[c.nodes[i]].name);
    out << "]";
    if (pp.placement) {
      const ChainPlacement& where = pp.placement->chains[k];
      const char* site = where.site == ChainSite::Coordinator ? "coordinator"
                         : where.site == ChainSite::Pinned    ? "pinned"
                                                              : "spread";
      out << ",\"placement\":" << json_string(site) << ",\"reason\":" << json_string(where.reason);
    }
    out << "}";
  }
  out << "],\"tasks\":[";
  std::vector<std::size_t> worker_of(plan.tasks.size(), 0);
  auto workers = worker_processes(spec, plan, pp);
  for (std::size_t w = 0; w < workers.size(); ++w)
    for (int id : workers[w]) worker_of[static_cast<std::size_t>(id)] = w;
  for (std::size_t k = 0; k < plan.tasks.size(); ++k) {
    const auto& t = plan.tasks[k];
    out << (k ? "," : "") << "{\"id\":" << t.id << ",\"chain\":" << t.chain << ",\"subtask\":" << t.subtask
        << ",\"worker\":" << worker_of[k] << ",\"host\":" << task_host_json(pp, t) << "}";
  }
  const ClusterSpec& cl = pp.cluster;
  out << "],\"placement\":{\"launcher\":" << json_string(launcher_name(cl.launcher))
      << ",\"checkpoint_storage\":" << json_string(storage_name(cl.storage))
      << ",\"encrypt\":" << (cl.encrypt ? "true" : "false") << ",\"hosts\":[";
  if (cl.launcher != LauncherKind::Slurm)
    for (std::size_t k = 0; k < pp.hosts.size(); ++k) {
      const auto& h = pp.hosts[k];
      bool assumed = std::find(pp.assumed.begin(), pp.assumed.end(), h.name) != pp.assumed.end();
      out << (k ? "," : "") << "{\"name\":" << json_string(h.name) << ",\"slots\":";
      if (assumed) out << "null";
      else out << h.slots;
      out << "}";
    }
  out << "],\"error\":" << (pp.placement ? std::string("null") : json_string(pp.placement.error())) << "}}\n";
  return out.str();
}

} // namespace

std::string render_graph(const PipelineSpec& spec, const PhysicalPlan& plan,
                         const PlacementPreview& placement, GraphFormat format) {
  switch (format) {
  case GraphFormat::Text: return render_text(spec, plan, placement);
  case GraphFormat::Dot: return render_dot(spec, plan, placement);
  case GraphFormat::Json: return render_json(spec, plan, placement);
  }
  return {};
}

} // namespace streamctl::pipeline
