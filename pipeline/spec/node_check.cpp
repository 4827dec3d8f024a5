#include "pipeline/spec/node_check.hpp"

#include <algorithm>
#include <string>
#include <unordered_set>

#include "pipeline/spec/top_level_schema.hpp"

namespace streamctl::pipeline::detail {

namespace {

const std::vector<std::string> partition_choices = {"forward", "rebalance", "broadcast"};
const std::vector<std::string> on_error_choices = {"drop", "fail", "dead_letter"};

Partition to_partition(const std::string& s) {
  if (s == "rebalance") return Partition::Rebalance;
  if (s == "broadcast") return Partition::Broadcast;
  return Partition::Forward;
}

OnError to_on_error(const std::string& s) {
  if (s == "fail") return OnError::Fail;
  if (s == "dead_letter") return OnError::DeadLetter;
  return OnError::Drop;
}

// Checks `inputs`; sets `graph.inputs`, or `graph.inputs_reported` when something is wrong.
void check_inputs(Checker& c, const toml::table& table, const Owner& owner, bool takes_inputs,
                  NodeDraft& d) {
  auto it = table.find("inputs");
  if (it == table.end()) {
    if (takes_inputs) {
      c.error(d.spec.where, owner.subject + " needs 'inputs'");
      d.graph.inputs_reported = true;
    }
    return;
  }
  if (!takes_inputs) {
    c.error(c.pos(it->first), owner.subject + " takes no inputs");
    return;
  }
  auto array = it->second.as_array();
  if (!array) {
    c.type_error(it->second, "inputs", "array of strings");
    d.graph.inputs_reported = true;
    return;
  }
  if (array->empty()) {
    c.error(c.pos(it->second), "'inputs' of " + owner.base + " must name at least one node");
    d.graph.inputs_reported = true;
  }
  // A set, not a search of the list: a sink may have thousands of inputs.
  std::unordered_set<std::string> seen;
  for (std::size_t k = 0; k < array->size(); ++k) {
    const toml::node& element = (*array)[k];
    auto s = element.as_string();
    if (!s) {
      c.type_error(element, "inputs[" + std::to_string(k) + "]", "string");
      d.graph.inputs_reported = true;
      continue;
    }
    if (!seen.insert(s->get()).second) {
      c.error(c.pos(element), "input '" + s->get() + "' of " + owner.base + " is listed twice");
      continue;
    }
    d.spec.inputs.push_back(s->get());
    d.graph.inputs.push_back(GraphInput{s->get(), c.pos(element)});
  }
}

void check_error_handling(Checker& c, const toml::table& table, const Owner& owner,
                          const std::filesystem::path& base_dir, NodeDraft& d) {
  const toml::node* on_error = table.get("on_error");
  bool on_error_reported = false;
  if (on_error) {
    auto mode = c.enum_value(*on_error, "on_error", on_error_choices);
    if (mode) d.spec.on_error = to_on_error(*mode);
    on_error_reported = !mode;
  }
  bool dead_lettering = d.spec.on_error == OnError::DeadLetter;
  auto it = table.find("dead_letter");
  if (it == table.end()) {
    if (dead_lettering)
      c.error(c.pos(*on_error),
              owner.subject + " needs 'dead_letter' (a file path) when on_error = \"dead_letter\"");
    return;
  }
  auto path = c.string_value(it->second, "dead_letter");
  if (!path) return;
  if (path->empty()) {
    c.error(c.pos(it->second), "'dead_letter' must not be empty");
    return;
  }
  if (on_error_reported) return;
  if (!dead_lettering) {
    // Most likely the user expects dead-lettering and would silently get `drop`.
    c.error(c.pos(it->first), "'dead_letter' is only used with on_error = \"dead_letter\"; " +
                                  owner.base + " has on_error = \"" +
                                  (d.spec.on_error == OnError::Fail ? "fail" : "drop") + "\"");
    return;
  }
  std::filesystem::path p = *path;
  d.spec.dead_letter = (p.is_absolute() ? p : base_dir / p).lexically_normal();
}

NodeReach reach_of(const NodeTypeSchema& schema) {
  if (schema.single_instance) return NodeReach::CoordinatorTerminal;
  bool has_path = std::any_of(schema.keys.begin(), schema.keys.end(),
                              [](const KeySchema& k) { return k.name == "path"; });
  return has_path ? NodeReach::Path : NodeReach::Anywhere;
}

// `host` and `shared` (SPEC §9). Whether `host` names one of [cluster] hosts is checked once
// every node is known (cluster_check.hpp).
void check_placement_keys(Checker& c, const toml::table& table, const Owner& owner,
                          const NodeTypeSchema* schema, NodeDraft& d) {
  if (schema) d.spec.reach = reach_of(*schema);
  if (auto v = table.get("host")) {
    if (auto s = c.string_value(*v, "host")) {
      if (s->empty())
        c.error(c.pos(*v), "'host' of " + owner.base + " must not be empty");
      else if (d.spec.reach == NodeReach::CoordinatorTerminal)
        c.error(c.pos(*v), owner.subject + " " +
                               (d.spec.role == NodeRole::Source ? "reads" : "writes") +
                               " the terminal of `streamctl run`, so it runs on the coordinator's "
                               "host: remove 'host'");
      else {
        d.spec.host = *s;
        d.host_where = c.pos(*v);
      }
    }
  }
  if (auto v = table.get("shared")) {
    if (!v->is_boolean())
      c.type_error(*v, "shared", "boolean");
    else if (schema && d.spec.reach != NodeReach::Path)
      c.error(c.pos(*v), "'shared' is only for nodes that read or write files (file sources and "
                         "sinks); " +
                             owner.subject + " has no path");
    else
      d.spec.shared = v->as_boolean()->get();
  }
}

} // namespace

std::optional<NodeDraft> check_node(Checker& c, NodeRole role, const toml::key& name,
                                    const toml::node& value,
                                    const std::vector<NodeTypeSchema>& schemas,
                                    const std::filesystem::path& base_dir) {
  std::string role_word = role_name(role);
  std::string what = role_word + " '" + std::string(name.str()) + "'";
  auto table = value.as_table();
  if (!table) {
    c.error(c.pos(value), what + " must be a table, got " + toml_type_name(value));
    return std::nullopt;
  }

  NodeDraft d;
  d.spec.name = name.str();
  d.spec.role = role;
  d.spec.where = c.pos(*table);
  d.name_where = c.pos(name);
  if (d.spec.where.line == 0) d.spec.where = d.name_where;
  if (!is_valid_name(d.spec.name))
    c.error(d.name_where, name_too_long(role_word + " name", d.spec.name)
                              .value_or("bad " + role_word + " name '" + d.spec.name + "': use " + name_rule));

  std::vector<std::string> type_names;
  for (const auto& s : schemas) type_names.push_back(s.type);
  std::string valid_types = "valid types: " + (type_names.empty() ? "(none)" : join(type_names));
  const NodeTypeSchema* schema = nullptr;
  if (auto type = table->get("type")) {
    if (auto s = c.string_value(*type, "type")) {
      auto found = std::find_if(schemas.begin(), schemas.end(),
                                [&](const NodeTypeSchema& t) { return t.type == *s; });
      if (found == schemas.end()) {
        std::string hint = did_you_mean(*s, type_names);
        c.error(c.pos(*type), "unknown " + role_word + " type '" + *s + "' in " + what + "; " +
                                  (hint.empty() ? "" : hint + " ") + valid_types);
      } else {
        schema = &*found;
        d.spec.type = *s;
      }
    }
  } else {
    c.error(d.spec.where, what + " needs 'type'; " + valid_types);
  }
  Owner owner{"in " + what, schema ? what + " (" + schema->type + ")" : what, what};

  bool takes_inputs = role != NodeRole::Source && (!schema || schema->takes_inputs);
  check_inputs(c, *table, owner, takes_inputs, d);

  // A key such as a file source's `follow` makes one subtask of a type that may have many.
  const bool one_subtask_by_key = schema && !schema->one_subtask_if.empty() &&
                                  (*table)[schema->one_subtask_if].value_or(false);
  const bool one_subtask = schema && (schema->single_instance || schema->one_subtask || one_subtask_by_key);
  if (auto p = table->get("parallelism")) {
    d.parallelism_where = c.pos(*p);
    if (auto n = c.int_at_least(*p, "parallelism", 1)) {
      if (one_subtask && *n > 1)
        c.error(c.pos(*p), "'parallelism' of " + owner.subject + " is always 1" +
                               (one_subtask_by_key ? " with " + schema->one_subtask_if + " = true" : std::string()));
      else
        d.parallelism = n;
    }
  }
  if (one_subtask) {
    d.spec.parallelism = 1;
    d.spec.one_subtask = true;
  }

  if (auto p = table->get("partition"))
    if (auto s = c.enum_value(*p, "partition", partition_choices))
      d.spec.partition = to_partition(*s);
  check_error_handling(c, *table, owner, base_dir, d);
  check_placement_keys(c, *table, owner, schema, d);

  d.graph.name = d.spec.name;
  d.graph.role = role;
  d.graph.where = d.spec.where;
  if (!schema) return d; // without a schema, the other keys cannot be told from typos

  // A source's `inputs` was reported above in plainer words than "unknown key".
  std::vector<std::string> common = {"type"};
  std::vector<std::string> hidden;
  (takes_inputs ? common : hidden).push_back("inputs");
  common.insert(common.end(), {"parallelism", "partition", "on_error", "dead_letter"});
  // Listed as valid only where they are; elsewhere reported above in words of their own.
  (d.spec.reach == NodeReach::CoordinatorTerminal ? hidden : common).push_back("host");
  (d.spec.reach == NodeReach::Path ? common : hidden).push_back("shared");
  c.check_table(*table, schema->keys, common, owner, "", hidden);

  // A window's `late_output` names a second output that other nodes can take as an input.
  bool has_late_output = std::any_of(schema->keys.begin(), schema->keys.end(),
                                     [](const KeySchema& k) { return k.name == "late_output"; });
  if (auto late = table->get("late_output"); has_late_output && late && late->is_string()) {
    d.graph.late_output = late->as_string()->get();
    d.late_output_where = c.pos(*late);
    if (!is_valid_name(*d.graph.late_output))
      c.error(d.late_output_where,
              name_too_long("late output name", *d.graph.late_output)
                  .value_or("bad late output name '" + *d.graph.late_output + "': use " + name_rule));
  }
  return d;
}

} // namespace streamctl::pipeline::detail
