#include "pipeline/spec/placement.hpp"

#include <algorithm>
#include <optional>

#include "pipeline/spec/cluster_spec.hpp"

namespace streamctl::pipeline {

namespace {

std::string node_words(const NodeSpec& n) {
  return n.type + " " + role_name(n.role) + " '" + n.name + "'";
}

std::string chain_words(const PipelineSpec& spec, const Chain& chain) {
  return "chain " + std::to_string(chain.id) + " '" + chain_label(spec, chain) + "' x" +
         std::to_string(chain.parallelism);
}

std::optional<std::size_t> host_named(const std::vector<PlacementHost>& hosts,
                                      const std::string& pin) {
  for (std::size_t h = 0; h < hosts.size(); ++h)
    if (pin_names_host(pin, hosts[h].name)) return h;
  return std::nullopt;
}

std::string host_names(const std::vector<PlacementHost>& hosts) {
  std::string out;
  for (const auto& h : hosts)
    out += (out.empty() ? "" : ", ") + h.name;
  return out.empty() ? "(none)" : out;
}

std::string slots_of_hosts(const std::vector<PlacementHost>& hosts) {
  std::string out;
  for (const auto& h : hosts)
    out += (out.empty() ? "" : ", ") + h.name + " " + std::to_string(h.slots);
  return out;
}

// Where one chain must go, and why; host set when pinned.
struct Decision {
  ChainPlacement placement;
  std::size_t host = 0;
};

// The chain's site from its nodes, or the problems that forbid any.
Decision decide(const PipelineSpec& spec, const Chain& chain,
                const std::vector<PlacementHost>& hosts, std::vector<std::string>& problems) {
  std::string bound;              // why the chain must stay on the coordinator's host
  std::optional<std::size_t> pin; // the host its pins name
  const NodeSpec* pinned_by = nullptr;
  bool bound_by_terminal = false;
  bool conflict = false; // reported: say nothing more of this chain
  for (std::size_t index : chain.nodes) {
    const NodeSpec& n = spec.nodes[index];
    const char* verb = n.role == NodeRole::Source ? "reads" : "writes";
    if (n.reach == NodeReach::CoordinatorTerminal && bound.empty()) {
      bound = node_words(n) + " " + verb + " the coordinator's terminal";
      bound_by_terminal = true;
    }
    if (n.reach == NodeReach::Path && !n.shared && n.host.empty() && bound.empty())
      bound = node_words(n) + " " + verb +
              " a path on the coordinator's host (it is not shared = true)";
    if (n.host.empty()) continue;
    auto h = host_named(hosts, n.host);
    if (!h) {
      problems.push_back(std::string(role_name(n.role)) + " '" + n.name +
                         "' pins itself to host '" + n.host +
                         "', which is not among the job's hosts: " + host_names(hosts));
      conflict = true;
      continue;
    }
    if (pin && *pin != *h) {
      problems.push_back(chain_words(spec, chain) + " runs in one process per subtask, but " +
                         role_name(pinned_by->role) + " '" + pinned_by->name + "' pins it to '" +
                         hosts[*pin].name + "' and " + role_name(n.role) + " '" + n.name +
                         "' to '" + hosts[*h].name +
                         "': pin them to the same host, or split the chain with partition = "
                         "\"rebalance\" on the second");
      conflict = true;
      continue;
    }
    pin = h;
    pinned_by = &n;
  }

  Decision d;
  if (pin && !bound.empty() && !conflict) {
    std::string fix = bound_by_terminal
                          ? "remove 'host', or split the chain: partition = \"rebalance\" on the "
                            "node that follows the pinned one"
                          : "pin the file node to that host too, mark it shared = true, or split "
                            "the chain with partition = \"rebalance\"";
    problems.push_back(chain_words(spec, chain) + " must run on the coordinator's host (" + bound +
                       "), but " + role_name(pinned_by->role) + " '" + pinned_by->name +
                       "' pins it to '" + hosts[*pin].name + "': " + fix);
  } else if (pin && !conflict) {
    d.placement = ChainPlacement{ChainSite::Pinned, hosts[*pin].name,
                                 "pinned by " + std::string(role_name(pinned_by->role)) + " '" +
                                     pinned_by->name + "'"};
    d.host = *pin;
  } else if (!bound.empty()) {
    d.placement = ChainPlacement{ChainSite::Coordinator, "", bound};
  } else if (hosts.empty()) {
    d.placement = ChainPlacement{ChainSite::Coordinator, "", "no hosts"};
  } else {
    d.placement = ChainPlacement{ChainSite::Spread, "", ""};
  }
  return d;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines)
    out += (out.empty() ? "" : "\n") + l;
  return out;
}

} // namespace

Result<Placement> place(const PipelineSpec& spec, const PhysicalPlan& plan,
                        const std::vector<PlacementHost>& hosts) {
  std::vector<std::string> problems;
  std::vector<Decision> decisions;
  for (const auto& chain : plan.chains)
    decisions.push_back(decide(spec, chain, hosts, problems));
  if (!problems.empty()) return fail(joined(problems));

  Placement p;
  p.task_hosts.assign(plan.tasks.size(), std::string());
  for (const auto& d : decisions)
    p.chains.push_back(d.placement);

  std::vector<int> room(hosts.size());
  for (std::size_t h = 0; h < hosts.size(); ++h)
    room[h] = std::max(0, hosts[h].slots);

  // Pinned chains first: they have no other choice.
  std::vector<std::string> pinned_need(hosts.size());
  std::vector<int> pinned_count(hosts.size(), 0);
  for (const auto& chain : plan.chains) {
    const Decision& d = decisions[static_cast<std::size_t>(chain.id)];
    if (d.placement.site != ChainSite::Pinned) continue;
    pinned_count[d.host] += chain.parallelism;
    pinned_need[d.host] += (pinned_need[d.host].empty() ? "" : ", ") + chain_words(spec, chain);
  }
  for (std::size_t h = 0; h < hosts.size(); ++h)
    if (pinned_count[h] > room[h])
      problems.push_back(
          "host '" + hosts[h].name + "' has " + std::to_string(room[h]) +
          " slot(s), but the nodes pinned to it need " + std::to_string(pinned_count[h]) + " (" +
          pinned_need[h] + "): give it more slots ({ host = \"" +
          std::string(host_address(hosts[h].name)) +
          "\", slots = " + std::to_string(pinned_count[h]) +
          "} in [cluster] hosts), pin fewer nodes to it, or lower their parallelism");
  if (!problems.empty()) return fail(joined(problems));

  int spread_need = 0;
  std::string spread_chains;
  for (const auto& chain : plan.chains) {
    if (decisions[static_cast<std::size_t>(chain.id)].placement.site != ChainSite::Spread) continue;
    spread_need += chain.parallelism;
    spread_chains += (spread_chains.empty() ? "" : ", ") + chain_words(spec, chain);
  }
  int pinned_total = 0, capacity = 0;
  for (std::size_t h = 0; h < hosts.size(); ++h) {
    pinned_total += pinned_count[h];
    capacity += room[h];
  }
  if (spread_need + pinned_total > capacity) {
    std::string need = std::to_string(spread_need + pinned_total);
    return fail("not enough slots: the job needs " + need +
                " on its hosts, one per task that does not run on the coordinator's host (" +
                spread_chains +
                (pinned_total ? ", and " + std::to_string(pinned_total) + " pinned" : "") +
                "), but the hosts have " + std::to_string(capacity) + ": " + slots_of_hosts(hosts) +
                ". Give the hosts more slots ({ host = \"NAME\", slots = N } in [cluster] hosts), "
                "add hosts, or lower the parallelism (-p, or a node's parallelism)");
  }

  for (const auto& task : plan.tasks) {
    const Decision& d = decisions[static_cast<std::size_t>(task.chain)];
    if (d.placement.site == ChainSite::Pinned) {
      p.task_hosts[static_cast<std::size_t>(task.id)] = hosts[d.host].name;
      --room[d.host];
    }
  }
  for (const auto& chain : plan.chains) {
    if (decisions[static_cast<std::size_t>(chain.id)].placement.site != ChainSite::Spread) continue;
    std::vector<int> held(hosts.size(), 0); // subtasks of this chain on each host
    for (int s = 0; s < chain.parallelism; ++s) {
      std::optional<std::size_t> best;
      for (std::size_t h = 0; h < hosts.size(); ++h) {
        if (room[h] <= 0) continue;
        if (!best || held[h] < held[*best] || (held[h] == held[*best] && room[h] > room[*best]))
          best = h;
      }
      // The capacity check above leaves a free slot for every spread task.
      const Task* task = plan.task_of(chain.id, s);
      p.task_hosts[static_cast<std::size_t>(task->id)] = hosts[*best].name;
      --room[*best];
      ++held[*best];
    }
  }
  return p;
}

} // namespace streamctl::pipeline
