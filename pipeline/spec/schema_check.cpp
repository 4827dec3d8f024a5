#include "pipeline/spec/schema_check.hpp"

#include <algorithm>

#include "pipeline/spec/expression.hpp"
#include "pipeline/spec/units.hpp"

namespace streamctl::pipeline::detail {

Owner Owner::nested(const std::string& path) const {
  if (base.empty()) return Owner{"in [" + path + "]", "[" + path + "]", ""};
  return Owner{"in '" + path + "' of " + base, "'" + path + "' of " + base, base};
}

std::string join(const std::vector<std::string>& items, std::string_view separator) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += separator;
    out += item;
  }
  return out;
}

std::string toml_type_name(const toml::node& node) {
  switch (node.type()) {
  case toml::node_type::string: return "string";
  case toml::node_type::integer: return "integer";
  case toml::node_type::floating_point: return "float";
  case toml::node_type::boolean: return "boolean";
  case toml::node_type::date: return "date";
  case toml::node_type::time: return "time";
  case toml::node_type::date_time: return "date-time";
  case toml::node_type::array: return "array";
  case toml::node_type::table: return "table";
  case toml::node_type::none: break;
  }
  return "nothing";
}

std::string with_article(const std::string& noun) {
  bool vowel =
      !noun.empty() && std::string_view("aeiou").find(noun.front()) != std::string_view::npos;
  return (vowel ? "an " : "a ") + noun;
}

Checker::Checker(Diagnostics& out, const SourceTexts& texts, std::string default_file)
    : out_(out), texts_(texts), default_file_(std::move(default_file)) {}

SourcePos Checker::pos(const toml::source_region& region) const {
  return SourcePos{region.path ? *region.path : default_file_, region.begin.line,
                   region.begin.column};
}

void Checker::check_unknown_keys(const toml::table& table, const std::vector<std::string>& known,
                                 const Owner& owner, const std::vector<std::string>& hidden) {
  for (const auto& [key, value] : table) {
    if (std::find(known.begin(), known.end(), key.str()) != known.end()) continue;
    if (std::find(hidden.begin(), hidden.end(), key.str()) != hidden.end()) continue;
    std::string hint = did_you_mean(key.str(), known);
    if (hint.empty()) hint = known.empty() ? "it takes no keys" : "valid keys: " + join(known);
    error(pos(key), "unknown key '" + std::string(key.str()) + "' " + owner.in + "; " + hint);
  }
}

void Checker::check_table(const toml::table& table, const std::vector<KeySchema>& keys,
                          const std::vector<std::string>& also_known, const Owner& owner,
                          const std::string& prefix, const std::vector<std::string>& hidden) {
  std::vector<std::string> known = also_known;
  for (const auto& k : keys) {
    known.push_back(k.name);
    if (k.required && !table.contains(k.name))
      error(pos(table), owner.subject + " needs '" + k.name + "'");
  }
  check_unknown_keys(table, known, owner, hidden);
  for (const auto& [key, value] : table) {
    auto k = std::find_if(keys.begin(), keys.end(),
                          [&](const KeySchema& s) { return s.name == key.str(); });
    if (k != keys.end()) check_value(value, *k, prefix + std::string(key.str()), owner);
  }
}

void Checker::type_error(const toml::node& value, const std::string& path,
                         const std::string& expected) {
  error(pos(value),
        "'" + path + "' must be " + with_article(expected) + ", got " + toml_type_name(value));
}

bool Checker::check_value(const toml::node& value, const KeySchema& key, const std::string& path,
                          const Owner& owner) {
  auto wrong_type = [&] {
    type_error(value, path, key_type_name(key.type));
    return false;
  };
  std::size_t before = error_count();
  switch (key.type) {
  case KeyType::String:
    if (!value.is_string()) return wrong_type();
    break;
  case KeyType::Int:
    if (!value.is_integer()) return wrong_type();
    break;
  case KeyType::Float:
    if (!value.is_number()) return wrong_type();
    break;
  case KeyType::Bool:
    if (!value.is_boolean()) return wrong_type();
    break;
  case KeyType::Duration: duration_value(value, path); break;
  case KeyType::Size:
    if (auto i = value.as_integer()) {
      if (i->get() < 0) error(pos(value), "'" + path + "' must not be negative");
    } else if (auto s = value.as_string()) {
      if (!parse_size_bytes(s->get()))
        error(pos(value), "bad size '" + s->get() + "': " + size_help);
    } else {
      return wrong_type();
    }
    break;
  case KeyType::Expression:
    if (!value.is_string()) return wrong_type();
    check_expression(value, path);
    break;
  case KeyType::ExpressionMap:
  case KeyType::StringMap: {
    auto table = value.as_table();
    if (!table) return wrong_type();
    std::string element = key.type == KeyType::StringMap ? "string" : "expression string";
    for (const auto& [k, v] : *table) {
      std::string sub = path + "." + std::string(k.str());
      if (!v.is_string())
        type_error(v, sub, element);
      else if (key.type == KeyType::ExpressionMap)
        check_expression(v, sub);
    }
    break;
  }
  case KeyType::StringArray: {
    auto array = value.as_array();
    if (!array) return wrong_type();
    for (std::size_t k = 0; k < array->size(); ++k)
      if (!(*array)[k].is_string())
        type_error((*array)[k], path + "[" + std::to_string(k) + "]", "string");
    break;
  }
  case KeyType::Enum: enum_value(value, path, key.choices); break;
  case KeyType::Table: {
    auto table = value.as_table();
    if (!table) return wrong_type();
    // A Table without children in its schema takes any keys; its owner checks them.
    if (!key.children.empty())
      check_table(*table, key.children, {}, owner.nested(path), path + ".");
    break;
  }
  }
  return error_count() == before;
}

std::optional<std::int64_t> Checker::int_at_least(const toml::node& value, const std::string& path,
                                                  std::int64_t min) {
  auto i = value.as_integer();
  if (!i) {
    type_error(value, path, "integer");
    return std::nullopt;
  }
  if (i->get() < min) {
    error(pos(value), "'" + path + "' must be at least " + std::to_string(min) + ", got " +
                          std::to_string(i->get()));
    return std::nullopt;
  }
  return i->get();
}

std::optional<std::string> Checker::string_value(const toml::node& value, const std::string& path) {
  auto s = value.as_string();
  if (!s) {
    type_error(value, path, "string");
    return std::nullopt;
  }
  return s->get();
}

std::optional<std::string> Checker::enum_value(const toml::node& value, const std::string& path,
                                               const std::vector<std::string>& choices) {
  auto s = value.as_string();
  if (!s) {
    type_error(value, path, "string");
    return std::nullopt;
  }
  if (std::find(choices.begin(), choices.end(), s->get()) == choices.end()) {
    error(pos(value),
          "'" + path + "' must be one of " + join(choices) + "; got '" + s->get() + "'");
    return std::nullopt;
  }
  return s->get();
}

std::optional<std::int64_t> Checker::duration_value(const toml::node& value,
                                                    const std::string& path) {
  if (auto i = value.as_integer(); i && i->get() == 0) return 0; // `interval = 0`: off
  auto s = value.as_string();
  if (!s) {
    type_error(value, path, key_type_name(KeyType::Duration));
    return std::nullopt;
  }
  auto ms = parse_duration_ms(s->get());
  if (!ms) error(pos(value), "bad duration '" + s->get() + "': " + duration_help);
  return ms;
}

void Checker::check_expression(const toml::node& value, const std::string& path) {
  const std::string& text = value.as_string()->get();
  try {
    Expression::compile(text, scratch_names_);
  } catch (const ExpressionError& e) {
    error(texts_.locate_in_string(pos(value), e.offset()),
          "bad expression in '" + path + "': " + e.what());
  }
}

} // namespace streamctl::pipeline::detail
