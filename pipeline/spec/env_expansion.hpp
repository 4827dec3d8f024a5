#pragma once
// ${NAME} and ${NAME:-DEFAULT} in the string values of a pipeline file (SPEC §3,
// streamctl-pipeline(5) "ENVIRONMENT VARIABLES IN VALUES"):
//
//   ${NAME}            the variable's value; unset is an error
//   ${NAME:-DEFAULT}   its value, or DEFAULT when it is unset or empty (as in sh); DEFAULT is
//                      taken as written, up to the first '}', and cannot hold another ${
//   $${                a literal "${" (a '$' anywhere else is itself)
//
// NAME is [A-Za-z_][A-Za-z0-9_]*. Only values are expanded, never keys, in tables and arrays
// at any depth; an expanded value is not expanded again.
//
// The values are looked up once, by the command that reads the file (the coordinator), and
// recorded (PipelineVariables). Everything that loads the same pipeline again - workers on other
// hosts, `restart`, `rescale`, completion, test cases - is handed that record and never looks
// at its own environment: a worker started by ssh, or a restart a week later from another
// shell, would otherwise see other values (or none) and run another pipeline than the one that
// was validated.

#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

#include "pipeline/spec/diagnostics.hpp"

namespace streamctl::pipeline {

// The variables a pipeline's strings used and that were set, NAME → VALUE. A name they used
// that is absent was unset, and stays so on every reload.
using PipelineVariables = std::map<std::string, std::string>;

// A variable's value, or nullopt when it is unset.
using VariableLookup = std::function<std::optional<std::string>(const std::string& name)>;

// getenv(3).
std::optional<std::string> process_environment(const std::string& name);

// One problem in one string: `offset` is that of its "${" in the string's value.
struct ExpansionProblem {
  std::size_t offset = 0;
  std::string message;
};

struct StringExpansion {
  std::string value;                     // the input unchanged when there are problems
  std::vector<ExpansionProblem> problems; // in order
};

// Expands one string; every set variable it looks up goes into `used`.
StringExpansion expand_string(std::string_view input, const VariableLookup& lookup,
                              PipelineVariables& used);

// Expands every string value of `root` in place; problems go to `out` at FILE:LINE:COL of
// their "${", found in `text`, the document `root` was parsed from (when a string writes
// its '$' as an escape, the string's own position).
void expand_variables(toml::table& root, std::string_view text, const std::string& file,
                      const VariableLookup& lookup, PipelineVariables& used, Diagnostics& out);

// Writes every "${" of the strings of `root` as "$${": a document whose values were expanded
// already, written out as TOML again (`streamctl test` does), then reads back as itself.
void escape_variables(toml::table& root);

} // namespace streamctl::pipeline
