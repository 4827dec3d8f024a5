#include "pipeline/spec/validation.hpp"

#include <algorithm>
#include <map>
#include <tuple>

#include "pipeline/spec/cluster_check.hpp"
#include "pipeline/spec/graph_check.hpp"
#include "pipeline/spec/node_check.hpp"
#include "pipeline/spec/schema_check.hpp"
#include "pipeline/spec/top_level_schema.hpp"

namespace streamctl::pipeline {

namespace {

using detail::Checker;
using detail::NodeDraft;
using detail::Owner;

// Positions in the file come first, then those of --set overrides, each in text order.
auto order_key(const SourcePos& p, const std::string& file) {
  return std::make_tuple(p.file != file, p.file, p.line, p.column);
}

// toml++ tables are ordered by key; the spec wants the order of the file.
std::vector<std::pair<const toml::key*, const toml::node*>> in_file_order(const toml::table& t,
                                                                          const Checker& c) {
  std::vector<std::pair<const toml::key*, const toml::node*>> entries;
  for (const auto& [key, value] : t) entries.emplace_back(&key, &value);
  auto where = [&](const std::pair<const toml::key*, const toml::node*>& e) {
    SourcePos p = c.pos(*e.second);
    return order_key(p.line ? p : c.pos(*e.first), c.default_file());
  };
  std::stable_sort(entries.begin(), entries.end(),
                   [&](const auto& a, const auto& b) { return where(a) < where(b); });
  return entries;
}

std::string place(const SourcePos& p, const SourcePos& from) {
  if (p.file == from.file) return "line " + std::to_string(p.line);
  return p.file + ":" + std::to_string(p.line);
}

// Names must be unique across sources, operators, sinks and late outputs: state is matched
// to nodes by name, and inputs name them.
void check_unique_names(Checker& c, const std::vector<NodeDraft>& drafts) {
  struct Named {
    std::string name, what;
    SourcePos where;
  };
  std::vector<Named> all;
  for (const auto& d : drafts) {
    all.push_back({d.spec.name, std::string(role_name(d.spec.role)) + " '" + d.spec.name + "'",
                   d.name_where});
    if (d.graph.late_output)
      all.push_back(
          {*d.graph.late_output,
           "the late output of " + std::string(role_name(d.spec.role)) + " '" + d.spec.name + "'",
           d.late_output_where});
  }
  std::stable_sort(all.begin(), all.end(), [&](const Named& a, const Named& b) {
    return order_key(a.where, c.default_file()) < order_key(b.where, c.default_file());
  });
  std::map<std::string, const Named*> first;
  for (const auto& n : all) {
    auto [it, inserted] = first.emplace(n.name, &n);
    if (!inserted)
      c.error(n.where, "name '" + n.name + "' is already used by " + it->second->what + " at " +
                           place(it->second->where, n.where));
  }
}

// `input.NAME` / `expect.NAME` of a [[test]]: NAME one of `names`, each value an array of
// non-empty strings.
std::map<std::string, std::vector<std::string>>
check_test_records(Checker& c, const toml::node& value, const std::string& key,
                   const std::string& role, const std::vector<std::string>& names,
                   const std::string& test) {
  std::map<std::string, std::vector<std::string>> out;
  auto table = value.as_table();
  if (!table) {
    c.type_error(value, key, "table of " + role + " name = [records]");
    return out;
  }
  for (const auto& [name, records] : *table) {
    std::string n(name.str());
    if (std::find(names.begin(), names.end(), n) == names.end()) {
      std::string hint = detail::did_you_mean(n, names);
      if (hint.empty()) hint = names.empty() ? "there is none" : "valid: " + detail::join(names);
      c.error(c.pos(name),
              "unknown " + role + " '" + n + "' in '" + key + "' of " + test + "; " + hint);
    }
    auto array = records.as_array();
    if (!array) {
      c.type_error(records, key + "." + n, "array of strings");
      continue;
    }
    auto& lines = out[n];
    for (std::size_t k = 0; k < array->size(); ++k) {
      std::string path = key + "." + n + "[" + std::to_string(k) + "]";
      if (auto s = c.string_value((*array)[k], path)) {
        if (s->empty()) c.error(c.pos((*array)[k]), "'" + path + "' of " + test + " is empty");
        lines.push_back(*s);
      }
    }
  }
  return out;
}

std::vector<TestCase> check_tests(Checker& c, const toml::table& root,
                                  const std::vector<NodeDraft>& drafts) {
  std::vector<TestCase> tests;
  auto array = root.get_as<toml::array>("test");
  if (!array) return tests; // absent, or reported by check_top_level
  std::vector<std::string> sources, sinks;
  for (const auto& d : drafts) {
    if (d.spec.role == NodeRole::Source) sources.push_back(d.spec.name);
    if (d.spec.role == NodeRole::Sink) sinks.push_back(d.spec.name);
  }
  std::map<std::string, SourcePos> names;
  for (std::size_t k = 0; k < array->size(); ++k) {
    auto table = (*array)[k].as_table();
    if (!table) continue; // reported by check_top_level
    TestCase t;
    t.where = c.pos(*table);
    std::string label = "test #" + std::to_string(k + 1);
    if (auto name = table->get("name")) {
      if (auto s = c.string_value(*name, "name")) {
        t.name = *s;
        label = "test '" + *s + "'";
        if (s->empty())
          c.error(c.pos(*name), "'name' of test #" + std::to_string(k + 1) + " is empty");
        auto [it, inserted] = names.emplace(*s, c.pos(*name));
        if (!inserted && !s->empty())
          c.error(c.pos(*name),
                  "test name '" + *s + "' is already used at " + place(it->second, c.pos(*name)));
      }
    } else {
      c.error(t.where, label + " needs 'name'");
    }
    c.check_unknown_keys(*table, {"name", "input", "expect"}, Owner{"in " + label, label, label});
    if (auto v = table->get("input"))
      t.input = check_test_records(c, *v, "input", "source", sources, label);
    if (auto v = table->get("expect"))
      t.expect = check_test_records(c, *v, "expect", "sink", sinks, label);
    tests.push_back(std::move(t));
  }
  return tests;
}

} // namespace

std::optional<PipelineSpec> validate_pipeline(const toml::table& root, const ValidationContext& ctx,
                                              Diagnostics& out) {
  SourceTexts no_texts;
  Checker c(out, ctx.texts ? *ctx.texts : no_texts, ctx.display_name);
  std::size_t errors_before = out.size();
  detail::TopLevel top = detail::check_top_level(c, root);

  static const SchemaCatalog empty_catalog;
  const SchemaCatalog& catalog = ctx.catalog ? *ctx.catalog : empty_catalog;
  struct Group {
    NodeRole role;
    const char* key;
    const std::vector<NodeTypeSchema>* schemas;
  };
  const Group groups[] = {{NodeRole::Source, "sources", &catalog.sources},
                          {NodeRole::Operator, "operators", &catalog.operators},
                          {NodeRole::Sink, "sinks", &catalog.sinks}};
  std::vector<NodeDraft> drafts;
  for (const auto& g : groups) {
    auto table = root.get_as<toml::table>(g.key);
    if (!table) continue; // absent, or reported by check_top_level
    for (const auto& [key, value] : in_file_order(*table, c))
      if (auto d = detail::check_node(c, g.role, *key, *value, *g.schemas, ctx.base_dir))
        drafts.push_back(std::move(*d));
  }
  check_unique_names(c, drafts);
  detail::check_host_pins(c, top.cluster, drafts);

  for (auto& d : drafts) {
    if (!d.parallelism) continue;
    if (top.max_parallelism_valid && *d.parallelism > top.max_parallelism)
      c.error(d.parallelism_where, "'parallelism' of " + std::string(role_name(d.spec.role)) +
                                       " '" + d.spec.name + "' (" + std::to_string(*d.parallelism) +
                                       ") is above max_parallelism (" +
                                       std::to_string(top.max_parallelism) + ")");
    else
      d.spec.parallelism = static_cast<int>(*d.parallelism);
  }

  std::vector<detail::GraphNode> graph;
  for (const auto& d : drafts) graph.push_back(d.graph);
  SourcePos file_start = c.pos(root);
  if (file_start.line == 0) file_start = SourcePos{ctx.display_name, 1, 1};
  detail::check_graph(graph, file_start, out);

  std::vector<TestCase> tests = check_tests(c, root, drafts);

  if (out.size() != errors_before) return std::nullopt;
  PipelineSpec spec;
  spec.name = top.name;
  spec.file = ctx.file;
  spec.base_dir = ctx.base_dir;
  spec.parallelism = top.parallelism;
  spec.max_parallelism = top.max_parallelism;
  for (auto& d : drafts) spec.nodes.push_back(std::move(d.spec));
  spec.tests = std::move(tests);
  return spec;
}

} // namespace streamctl::pipeline
