#include "pipeline/spec/top_level_schema.hpp"

#include "pipeline/spec/autoscale_check.hpp"
#include "pipeline/spec/listen_address.hpp"

#include <algorithm>
#include <vector>

namespace streamctl::pipeline::detail {

namespace {

KeySchema key(std::string name, KeyType type, std::vector<std::string> choices = {},
              std::vector<KeySchema> children = {}) {
  KeySchema k;
  k.name = std::move(name);
  k.type = type;
  k.choices = std::move(choices);
  k.children = std::move(children);
  return k;
}

const std::vector<KeySchema>& checkpoint_keys() {
  static const std::vector<KeySchema> keys = {
      key("interval", KeyType::Duration),
      key("dir", KeyType::String),
      key("mode", KeyType::Enum, {"exactly-once", "at-least-once"}),
      key("retain", KeyType::Int),
      key("timeout", KeyType::Duration),
      key("storage", KeyType::Enum, {"coordinator", "shared"}),
      key("incremental", KeyType::Bool),
      key("full_every", KeyType::Int),
      key("rolling", KeyType::Bool),
      key("snapshot", KeyType::Enum, {"copy", "fork", "deferred"}),
  };
  return keys;
}

const std::vector<KeySchema>& restart_keys() {
  static const std::vector<KeySchema> keys = {
      key("strategy", KeyType::Enum, {"none", "fixed", "exponential"}),
      key("max_attempts", KeyType::Int),
      key("delay", KeyType::Duration),
      key("heartbeat_timeout", KeyType::Duration),
  };
  return keys;
}

const std::vector<KeySchema>& autoscale_keys() {
  static const std::vector<KeySchema> keys = {
      key("enabled", KeyType::Bool),
      key("min_parallelism", KeyType::Int),
      key("max_parallelism", KeyType::Int),
      key("interval", KeyType::Duration),
      key("target_utilization", KeyType::Float),
      key("cooldown", KeyType::Duration),
  };
  return keys;
}

// Every top-level key, in the order messages list them. `hosts`, `test`, `sources`,
// `operators` and `sinks` are only type-checked here.
const std::vector<KeySchema>& top_level_keys() {
  static const std::vector<KeySchema> keys = {
      key("name", KeyType::String),
      key("parallelism", KeyType::Int),
      key("max_parallelism", KeyType::Int),
      key("buffer_timeout", KeyType::Duration),
      key("batch_size", KeyType::Int),
      key("projection", KeyType::Bool),
      key("combine", KeyType::Bool),
      key("slot_sharing", KeyType::Bool),
      key("checkpoint", KeyType::Table, {}, checkpoint_keys()),
      key("restart", KeyType::Table, {}, restart_keys()),
      key("cluster", KeyType::Table),
      key("metrics", KeyType::Table, {}, {key("listen", KeyType::String), key("latency_interval", KeyType::Duration)}),
      key("autoscale", KeyType::Table, {}, autoscale_keys()),
      key("sources", KeyType::Table),
      key("operators", KeyType::Table),
      key("sinks", KeyType::Table),
  };
  return keys;
}

// A non-negative integer below `min` is reported once its type was found right.
void check_min(Checker& c, const toml::table& table, const std::string& key_name,
               const std::string& path, std::int64_t min) {
  if (auto v = table.get(key_name); v && v->is_integer()) c.int_at_least(*v, path, min);
}

} // namespace

bool is_valid_name(std::string_view name) {
  return !name.empty() && name.size() <= max_name_length && std::all_of(name.begin(), name.end(), [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '-';
  });
}

std::optional<std::string> name_too_long(std::string_view what, std::string_view name) {
  if (name.size() <= max_name_length) return std::nullopt;
  return std::string(what) + " '" + std::string(name.substr(0, 24)) + "...' is " + std::to_string(name.size()) +
         " characters long, above the limit of " + std::to_string(max_name_length) +
         " (it becomes a file name): shorten it";
}

TopLevel check_top_level(Checker& c, const toml::table& root) {
  TopLevel top;
  Owner owner{"at the top level", "the pipeline", ""};

  std::vector<std::string> known;
  for (const auto& k : top_level_keys()) known.push_back(k.name);
  known.push_back("test");
  c.check_unknown_keys(root, known, owner);

  for (const auto& k : top_level_keys()) {
    if (auto v = root.get(k.name); v && k.name != "cluster") c.check_value(*v, k, k.name, owner);
  }

  if (auto v = root.get("name")) {
    if (auto s = v->as_string(); s && !is_valid_name(s->get()))
      c.error(c.pos(*v), name_too_long("the job 'name'", s->get())
                             .value_or("'name' must be " + std::string(name_rule) + ", got '" + s->get() + "'"));
    else if (s)
      top.name = s->get();
  } else {
    SourcePos where = c.pos(root);
    if (where.line == 0) where = SourcePos{c.default_file(), 1, 1};
    c.error(where, "the pipeline needs 'name' (the job name: " + std::string(name_rule) + ")");
  }

  if (auto v = root.get("max_parallelism"); v && v->is_integer()) {
    auto m = c.int_at_least(*v, "max_parallelism", 1);
    if (m && *m > max_key_groups) {
      c.error(c.pos(*v), "'max_parallelism' must be at most " + std::to_string(max_key_groups) +
                             ", got " + std::to_string(*m));
      m.reset();
    }
    if (m) top.max_parallelism = static_cast<int>(*m);
    top.max_parallelism_valid = m.has_value();
  } else if (v) {
    top.max_parallelism_valid = false;
  }

  if (auto v = root.get("parallelism"); v && v->is_integer()) {
    if (auto p = c.int_at_least(*v, "parallelism", 1)) {
      if (top.max_parallelism_valid && *p > top.max_parallelism)
        c.error(c.pos(*v), "'parallelism' (" + std::to_string(*p) + ") is above max_parallelism (" +
                               std::to_string(top.max_parallelism) + ")");
      else
        top.parallelism = static_cast<int>(*p);
    }
  }
  check_min(c, root, "batch_size", "batch_size", 1);

  if (auto t = root.get_as<toml::table>("checkpoint")) {
    check_min(c, *t, "retain", "checkpoint.retain", 1);
    check_min(c, *t, "full_every", "checkpoint.full_every", 1);
  }
  if (auto t = root.get_as<toml::table>("restart"))
    check_min(c, *t, "max_attempts", "restart.max_attempts", 0);
  if (auto t = root.get_as<toml::table>("autoscale"))
    check_autoscale(c, *t, top.max_parallelism, top.max_parallelism_valid);
  if (auto t = root.get_as<toml::table>("metrics"))
    if (auto v = t->get_as<std::string>("listen"))
      if (auto address = listen_address_of(v->get()); !address)
        c.error(c.pos(*v), "'metrics.listen' = \"" + v->get() + "\": " + address.error());
  if (auto v = root.get("cluster"); v && !v->is_table())
    c.type_error(*v, "cluster", "table");
  top.cluster = check_cluster(c, root.get_as<toml::table>("cluster"));
  if (auto v = root.get("test");
      v && !(v->is_array_of_tables() || (v->as_array() && v->as_array()->empty())))
    c.type_error(*v, "test", "array of tables ([[test]])");
  return top;
}

} // namespace streamctl::pipeline::detail
