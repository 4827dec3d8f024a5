#include "pipeline/spec/graph_check.hpp"

#include <algorithm>
#include <deque>
#include <functional>
#include <map>

#include "pipeline/spec/schema_check.hpp"

namespace streamctl::pipeline::detail {

namespace {

std::string describe(const GraphNode& n) {
  return std::string(role_name(n.role)) + " '" + n.name + "'";
}

bool before(const SourcePos& a, const SourcePos& b) {
  return std::tie(a.file, a.line, a.column) < std::tie(b.file, b.line, b.column);
}

// Tarjan's strongly connected components over `next` (producer -> consumers).
std::vector<std::vector<std::size_t>>
strongly_connected(const std::vector<std::vector<std::size_t>>& next) {
  std::size_t n = next.size(), counter = 0;
  std::vector<std::size_t> index(n, SIZE_MAX), low(n, 0);
  std::vector<bool> on_stack(n, false);
  std::vector<std::size_t> stack;
  std::vector<std::vector<std::size_t>> out;
  std::function<void(std::size_t)> visit = [&](std::size_t v) {
    index[v] = low[v] = counter++;
    stack.push_back(v);
    on_stack[v] = true;
    for (std::size_t w : next[v]) {
      if (index[w] == SIZE_MAX) {
        visit(w);
        low[v] = std::min(low[v], low[w]);
      } else if (on_stack[w]) {
        low[v] = std::min(low[v], index[w]);
      }
    }
    if (low[v] == index[v]) {
      std::vector<std::size_t> component;
      std::size_t w;
      do {
        w = stack.back();
        stack.pop_back();
        on_stack[w] = false;
        component.push_back(w);
      } while (w != v);
      out.push_back(std::move(component));
    }
  };
  for (std::size_t v = 0; v < n; ++v)
    if (index[v] == SIZE_MAX) visit(v);
  return out;
}

// A shortest way from `start` back to itself inside `component`, as node indices.
std::vector<std::size_t> cycle_through(std::size_t start, const std::vector<std::size_t>& component,
                                       const std::vector<std::vector<std::size_t>>& next) {
  std::map<std::size_t, std::size_t> parent;
  std::deque<std::size_t> queue{start};
  auto in_component = [&](std::size_t v) {
    return std::find(component.begin(), component.end(), v) != component.end();
  };
  while (!queue.empty()) {
    std::size_t v = queue.front();
    queue.pop_front();
    for (std::size_t w : next[v]) {
      if (!in_component(w)) continue;
      if (w == start) {
        std::vector<std::size_t> path{start};
        for (std::size_t u = v; u != start; u = parent[u]) path.insert(path.begin() + 1, u);
        path.push_back(start);
        return path;
      }
      if (!parent.count(w)) {
        parent[w] = v;
        queue.push_back(w);
      }
    }
  }
  return {start, start};
}

} // namespace

void check_graph(const std::vector<GraphNode>& nodes, const SourcePos& file_start,
                 Diagnostics& out) {
  // What an input may name: a node, or a late output (which stands for its operator).
  std::map<std::string, std::size_t> producer;
  std::vector<std::string> valid_inputs;
  for (std::size_t k = 0; k < nodes.size(); ++k) {
    if (!producer.count(nodes[k].name)) producer[nodes[k].name] = k;
    if (nodes[k].role != NodeRole::Sink) valid_inputs.push_back(nodes[k].name);
  }
  for (std::size_t k = 0; k < nodes.size(); ++k) {
    if (nodes[k].late_output && !producer.count(*nodes[k].late_output)) {
      producer[*nodes[k].late_output] = k;
      valid_inputs.push_back(*nodes[k].late_output);
    }
  }

  std::vector<std::vector<std::size_t>> next(nodes.size());
  std::vector<bool> broken(nodes.size(), false); // an input of it was reported
  for (std::size_t k = 0; k < nodes.size(); ++k) {
    broken[k] = nodes[k].inputs_reported;
    for (const auto& input : nodes[k].inputs) {
      auto p = producer.find(input.name);
      if (p == producer.end()) {
        std::string hint = did_you_mean(input.name, valid_inputs);
        if (hint.empty())
          hint = valid_inputs.empty() ? "there is no source or operator"
                                      : "valid inputs: " + join(valid_inputs);
        out.add(input.where,
                "dangling input '" + input.name + "' of " + describe(nodes[k]) + "; " + hint);
        broken[k] = true;
      } else if (nodes[p->second].role == NodeRole::Sink) {
        out.add(input.where, "input '" + input.name + "' of " + describe(nodes[k]) +
                                 " is a sink; a sink has no output");
        broken[k] = true;
      } else {
        next[p->second].push_back(k);
      }
    }
  }

  auto by_file_order = [&](std::size_t a, std::size_t b) {
    return before(nodes[a].where, nodes[b].where);
  };
  for (auto& component : strongly_connected(next)) {
    bool self_loop = component.size() == 1 &&
                     std::count(next[component[0]].begin(), next[component[0]].end(), component[0]);
    if (component.size() < 2 && !self_loop) continue;
    std::size_t first = *std::min_element(component.begin(), component.end(), by_file_order);
    std::vector<std::string> names;
    for (std::size_t v : cycle_through(first, component, next)) names.push_back(nodes[v].name);
    out.add(nodes[first].where, "cycle: " + join(names, " -> "));
  }

  // Reachability from the sources; a sink behind a reported input is not reported again.
  std::vector<bool> reached(nodes.size(), false), tainted(nodes.size(), false);
  std::deque<std::size_t> queue;
  for (std::size_t k = 0; k < nodes.size(); ++k)
    if (nodes[k].role == NodeRole::Source) {
      reached[k] = true;
      queue.push_back(k);
    }
  while (!queue.empty()) {
    std::size_t v = queue.front();
    queue.pop_front();
    for (std::size_t w : next[v])
      if (!reached[w]) {
        reached[w] = true;
        queue.push_back(w);
      }
  }
  for (std::size_t k = 0; k < nodes.size(); ++k)
    if (broken[k]) {
      tainted[k] = true;
      queue.push_back(k);
    }
  while (!queue.empty()) {
    std::size_t v = queue.front();
    queue.pop_front();
    for (std::size_t w : next[v])
      if (!tainted[w]) {
        tainted[w] = true;
        queue.push_back(w);
      }
  }
  bool any_source = std::any_of(nodes.begin(), nodes.end(),
                                [](const GraphNode& n) { return n.role == NodeRole::Source; });
  bool any_sink = false;
  for (std::size_t k = 0; k < nodes.size(); ++k) {
    if (nodes[k].role != NodeRole::Sink) continue;
    any_sink = true;
    if (any_source && !reached[k] && !tainted[k])
      out.add(nodes[k].where, describe(nodes[k]) + " is not reachable from any source");
  }
  if (!any_source) out.add(file_start, "the pipeline has no source; add a [sources.NAME] table");
  if (!any_sink) out.add(file_start, "the pipeline has no sink; add a [sinks.NAME] table");
}

} // namespace streamctl::pipeline::detail
