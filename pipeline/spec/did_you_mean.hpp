#pragma once
// "did you mean ...?" for a word that names nothing: an unknown key, type or input of a
// pipeline file, and an unknown command or option on the command line. One rule for all of
// them, so that a typo is caught the same way wherever it is made.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace streamctl::pipeline {

// The candidate closest to `word` when it is close enough: an optimal string alignment
// distance (a swap of neighbours is one edit) of at most one edit for short words, a third
// of the word for longer ones, and less than the candidate's own length. The first of equals.
std::optional<std::string> closest_name(std::string_view word,
                                        const std::vector<std::string>& candidates);

// "did you mean 'where'?" when one candidate is close enough to `word`, else "".
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

} // namespace streamctl::pipeline
