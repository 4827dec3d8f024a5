#include "pipeline/spec/lint.hpp"

#include <deque>
#include <unordered_map>

#include "pipeline/spec/edit_distance.hpp"

namespace streamctl::pipeline {

namespace {

// Who reads each node's outputs (main and late alike): (consumer, input index).
using Consumers = std::vector<std::vector<std::pair<std::size_t, std::size_t>>>;
using Producers = std::unordered_map<std::string, std::size_t>;

// The node behind each input name: a node's name, or a window's late_output.
Producers producers_of(const PipelineSpec& spec) {
  Producers producer;
  for (std::size_t k = 0; k < spec.nodes.size(); ++k) producer.emplace(spec.nodes[k].name, k);
  for (std::size_t k = 0; k < spec.nodes.size(); ++k)
    if (auto late = spec.nodes[k].config["late_output"].value<std::string>())
      producer.emplace(*late, k);
  return producer;
}

Consumers consumers_of(const PipelineSpec& spec, const Producers& producer) {
  Consumers out(spec.nodes.size());
  for (std::size_t c = 0; c < spec.nodes.size(); ++c)
    for (std::size_t i = 0; i < spec.nodes[c].inputs.size(); ++i)
      if (auto it = producer.find(spec.nodes[c].inputs[i]); it != producer.end())
        out[it->second].emplace_back(c, i);
  return out;
}

// Nodes downstream of `from`, breadth first, each once, with the input it is reached by.
std::vector<std::pair<std::size_t, std::size_t>> downstream(const Consumers& consumers,
                                                            std::size_t from) {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  std::vector<bool> seen(consumers.size(), false);
  std::deque<std::size_t> todo{from};
  seen[from] = true;
  while (!todo.empty()) {
    std::size_t k = todo.front();
    todo.pop_front();
    for (const auto& [c, input] : consumers[k]) {
      if (seen[c]) continue;
      seen[c] = true;
      out.emplace_back(c, input);
      todo.push_back(c);
    }
  }
  return out;
}

// What node `k` reads itself of input `input`: its read_fields when nothing is read after it.
FieldSet own_reads(const PipelineSpec& spec, const SchemaCatalog& catalog, std::size_t k,
                   std::size_t input) {
  const NodeSpec& node = spec.nodes[k];
  const NodeTypeSchema* schema = catalog.schema_for(node);
  if (schema == nullptr || !schema->read_fields) return FieldSet::everything();
  auto reads = schema->read_fields(spec, node, FieldSet::none(), FieldSet::none());
  return input < reads.size() ? reads[input] : FieldSet::everything();
}

std::string nearest(const std::string& name, const FieldSet& made) {
  std::string best;
  std::size_t best_distance = 3; // at most two edits away
  for (const auto& candidate : made.names) {
    std::size_t d = edit_distance(name, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  return best;
}

std::string listed(const FieldSet& fields) {
  std::string out;
  for (const auto& name : fields.names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

// Fields read downstream of a source that its records never have.
void check_made_fields(const PipelineSpec& spec, const SchemaCatalog& catalog,
                       const Consumers& consumers, std::size_t source,
                       std::vector<std::string>& out) {
  const NodeSpec& node = spec.nodes[source];
  const NodeTypeSchema* schema = catalog.schema_for(node);
  if (schema == nullptr || !schema->made_fields) return;
  const FieldSet made = schema->made_fields(node);
  const FieldSet emitted = spec.fields_emitted(source);
  if (made.all || emitted.all) return; // unknown, or a sink writes whole records: no telling
  for (const auto& name : emitted.names) {
    if (made.contains(name)) continue;
    // Blame the first node downstream that reads it itself, else the source's event_time.
    std::string where = position_of(spec, node, "event_time");
    std::string who = "the event_time of source '" + node.name + "'";
    for (const auto& [k, input] : downstream(consumers, source))
      if (own_reads(spec, catalog, k, input).contains(name)) {
        where = position_of(spec, spec.nodes[k], "type");
        who = std::string(role_name(spec.nodes[k].role)) + " '" + spec.nodes[k].name + "'";
        break;
      }
    std::string suggestion = nearest(name, made);
    out.push_back(where + ": warning: " + who + " reads field '" + name + "', which source '" +
                  node.name + "' never makes (its records have " + listed(made) +
                  "), so it is null in every record" +
                  (suggestion.empty() ? "" : "; did you mean '" + suggestion + "'?"));
  }
}

// Which nodes have a source with event_time upstream (or are one): reachable from such a
// source. Breadth first, without recursion: validate handles pipelines of 20,000 nodes.
std::vector<bool> event_time_reach(const PipelineSpec& spec, const Consumers& consumers) {
  std::vector<bool> reached(spec.nodes.size(), false);
  std::deque<std::size_t> todo;
  for (std::size_t k = 0; k < spec.nodes.size(); ++k)
    if (spec.nodes[k].role == NodeRole::Source && spec.nodes[k].config.contains("event_time")) {
      reached[k] = true;
      todo.push_back(k);
    }
  while (!todo.empty()) {
    std::size_t k = todo.front();
    todo.pop_front();
    for (const auto& [c, input] : consumers[k])
      if (!reached[c]) {
        reached[c] = true;
        todo.push_back(c);
      }
  }
  return reached;
}

} // namespace

std::vector<std::string> lint_pipeline(const PipelineSpec& spec, const SchemaCatalog& catalog) {
  std::vector<std::string> out;
  const Producers producer = producers_of(spec);
  const Consumers consumers = consumers_of(spec, producer);
  const std::vector<bool> event_time = event_time_reach(spec, consumers);
  for (std::size_t k = 0; k < spec.nodes.size(); ++k) {
    const NodeSpec& node = spec.nodes[k];
    if (node.role == NodeRole::Source) check_made_fields(spec, catalog, consumers, k, out);
    if ((node.type == "window" || node.type == "join") && !event_time[k])
      out.push_back(position_of(spec, node, "type") + ": warning: " + node.type + " '" +
                    node.name +
                    "' has no source with 'event_time' upstream, so it uses processing time "
                    "(when records arrive) and its results depend on timing; set event_time on "
                    "the source for results that do not");
  }
  return out;
}

std::vector<bool> nodes_with_event_time(const PipelineSpec& spec) {
  return event_time_reach(spec, consumers_of(spec, producers_of(spec)));
}

} // namespace streamctl::pipeline
