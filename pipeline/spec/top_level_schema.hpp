#pragma once
// The keys of a pipeline file outside its nodes and tests (SPEC §3, §9): name, parallelism,
// max_parallelism, buffer_timeout, batch_size, [checkpoint], [restart], [cluster], [metrics],
// [autoscale].
// Internal to the pipeline spec.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <toml++/toml.h>

#include "pipeline/spec/cluster_check.hpp"
#include "pipeline/spec/schema_check.hpp"

namespace streamctl::pipeline::detail {

// Rescale cannot go past the number of key groups; Flink's bound, for the same reason
// (per-key-group bookkeeping in every snapshot).
inline constexpr std::int64_t max_key_groups = 32768;
inline constexpr int default_max_parallelism = 128;

struct TopLevel {
  std::string name;
  int parallelism = 1;
  int max_parallelism = default_max_parallelism;
  bool max_parallelism_valid = true; // false: it was reported; skip comparisons against it
  ClusterDraft cluster;
};

// Names become file names: a job's name starts its directory under the state dir
// (NAME-YYYYmmdd-HHMMSS-XXXX) and names its checkpoint directory, a node's name its test
// files (NAME.dead_letter.jsonl); 128 leaves room for any suffix within NAME_MAX (255).
inline constexpr std::size_t max_name_length = 128;

// True for [a-z0-9_-]{1,128}: job names and node names.
bool is_valid_name(std::string_view name);
inline constexpr const char* name_rule = "lowercase letters, digits, '_' and '-'";

// When `name` is too long: "<what> is 200 characters long, above the limit of 128 ...".
std::optional<std::string> name_too_long(std::string_view what, std::string_view name);

// Checks every top-level key; `sources`, `operators`, `sinks` and `test` only for being a
// table / an array (validation checks what is inside).
TopLevel check_top_level(Checker& checker, const toml::table& root);

} // namespace streamctl::pipeline::detail
