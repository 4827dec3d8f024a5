#pragma once
// Checking TOML tables against KeySchemas, with every problem reported at its place.
// Internal to the pipeline spec (config_loader, validation); not an API for operators.
//
// Messages, each prefixed by FILE:LINE:COL when printed:
//   unknown key 'wher' in operator 'ok'; did you mean 'where'?
//   unknown key 'x' in [checkpoint]; valid keys: interval, dir, mode, retain, timeout
//   operator 'ok' (filter) needs 'where'
//   'parallelism' must be an integer, got string
//   'format' must be one of json, csv, lines; got 'jsn'
//   bad duration '5 sec': use a number and a unit: ms, s, m, h, d
//   bad expression in 'where': <ExpressionError message>   (at the offending character)

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

#include "pipeline/spec/diagnostics.hpp"
#include "pipeline/spec/did_you_mean.hpp"
#include "pipeline/spec/node_schema.hpp"
#include "pipeline/spec/source_text.hpp"
#include "state/field_names.hpp"

namespace streamctl::pipeline::detail {

// Whose keys are being checked, for messages.
struct Owner {
  std::string in;      // "in operator 'ok'": follows "unknown key 'x' "
  std::string subject; // "operator 'ok' (filter)": precedes " needs 'x'"
  std::string base;    // "operator 'ok'"; empty at the top level

  // The owner of the keys of the nested table at `path` ("window", "checkpoint").
  Owner nested(const std::string& path) const;
};

// "did you mean 'where'?": shared with the command line (did_you_mean.hpp).
using pipeline::did_you_mean;
std::string join(const std::vector<std::string>& items, std::string_view separator = ", ");
// "integer", "string", "float", "boolean", "array", "table", "date", "time", "date-time".
std::string toml_type_name(const toml::node& node);
// "an integer", "a string".
std::string with_article(const std::string& noun);

class Checker {
public:
  Checker(Diagnostics& out, const SourceTexts& texts, std::string default_file);

  SourcePos pos(const toml::source_region& region) const;
  SourcePos pos(const toml::node& node) const { return pos(node.source()); }
  SourcePos pos(const toml::key& key) const { return pos(key.source()); }
  void error(SourcePos where, std::string message) {
    out_.add(std::move(where), std::move(message));
  }
  std::size_t error_count() const { return out_.size(); }
  const std::string& default_file() const { return default_file_; }

  // Reports each key of `table` not in `known` nor in `hidden` (keys the caller reports in
  // its own words, and that messages should not list as valid).
  void check_unknown_keys(const toml::table& table, const std::vector<std::string>& known,
                          const Owner& owner, const std::vector<std::string>& hidden = {});

  // Checks `table` against `keys`: missing required keys (at the table), unknown keys (those in
  // `also_known` are checked by the caller), then each value present. `prefix` is the dotted
  // path of `table` inside the owner, for messages ("" or "window.").
  void check_table(const toml::table& table, const std::vector<KeySchema>& keys,
                   const std::vector<std::string>& also_known, const Owner& owner,
                   const std::string& prefix, const std::vector<std::string>& hidden = {});

  // Checks one value against its schema; false when it reported a problem.
  bool check_value(const toml::node& value, const KeySchema& key, const std::string& path,
                   const Owner& owner);

  // Helpers for keys validation checks itself; each reports a problem and returns nullopt.
  std::optional<std::int64_t> int_at_least(const toml::node& value, const std::string& path,
                                           std::int64_t min);
  std::optional<std::string> string_value(const toml::node& value, const std::string& path);
  std::optional<std::string> enum_value(const toml::node& value, const std::string& path,
                                        const std::vector<std::string>& choices);
  // A non-negative Duration (a string, or the integer 0), in milliseconds.
  std::optional<std::int64_t> duration_value(const toml::node& value, const std::string& path);
  void type_error(const toml::node& value, const std::string& path, const std::string& expected);

private:
  void check_expression(const toml::node& value, const std::string& path);

  Diagnostics& out_;
  const SourceTexts& texts_;
  std::string default_file_;
  state::FieldNames scratch_names_; // expressions compile against it; the result is thrown away
};

} // namespace streamctl::pipeline::detail
