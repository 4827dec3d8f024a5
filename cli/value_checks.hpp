#pragma once
// Checks of option values that say in plain words what is expected, for CLI11 options: a
// failed check reads "--parallelism must be at least 1" once usage_errors.cpp puts the option's
// name in front (CLI11's own checks print ranges to 1.79769e+308 and set notation).

#include <string>
#include <vector>

#include <CLI/Validators.hpp>

namespace streamctl::cli {

// A whole number >= `min`: "must be at least 1", "must be a whole number, got 'x'".
CLI::Validator at_least(long long min);
// A number (fractions allowed) within [low, high]: "must be between 0.1 and 3600".
CLI::Validator number_between(double low, double high);
// A size as in a pipeline file ("16MiB", "10MB", "512"), turned into its count of bytes.
CLI::Validator byte_size();
// NAME=N with N a whole number >= 1 (rescale --operator).
CLI::Validator name_equals_count();
// One of `values`: "must be one of text, dot, json; got 'jsno'; did you mean 'json'?".
CLI::Validator one_of(std::vector<std::string> values);

} // namespace streamctl::cli
