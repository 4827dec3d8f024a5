#pragma once
// Levenshtein distance, for "did you mean ...?" in messages about keys, types, inputs,
// functions and aggregates.

#include <cstddef>
#include <string_view>

namespace streamctl::pipeline {

std::size_t edit_distance(std::string_view a, std::string_view b);

} // namespace streamctl::pipeline
