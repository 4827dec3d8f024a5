#pragma once
// The keys of a pipeline file outside its nodes and tests (SPEC §3, §9): name, parallelism,
// max_parallelism, buffer_timeout, batch_size, [checkpoint], [restart], [cluster], [metrics].
// Internal to the pipeline spec.

#include <cstdint>
#include <string>

#include <toml++/toml.h>

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
};

// True for [a-z0-9_-]+: job names and node names.
bool is_valid_name(std::string_view name);
inline constexpr const char* name_rule = "lowercase letters, digits, '_' and '-'";

// Checks every top-level key; `sources`, `operators`, `sinks` and `test` only for being a
// table / an array (validation checks what is inside).
TopLevel check_top_level(Checker& checker, const toml::table& root);

} // namespace streamctl::pipeline::detail
