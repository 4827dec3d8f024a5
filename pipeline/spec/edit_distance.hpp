#pragma once
// Edit distance, for "did you mean ...?" in messages about keys, types, inputs, functions,
// aggregates, fields, commands and options: one measure wherever a typo is caught.

#include <cstddef>
#include <string_view>

namespace streamctl::pipeline {

// Optimal string alignment distance: insertions, deletions and substitutions, and a swap of
// neighbours ("rnu" for "run") counting as one edit, as typing errors are usually made.
std::size_t edit_distance(std::string_view a, std::string_view b);

} // namespace streamctl::pipeline
