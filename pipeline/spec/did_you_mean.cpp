#include "pipeline/spec/did_you_mean.hpp"

#include <algorithm>

#include "pipeline/spec/edit_distance.hpp"

namespace streamctl::pipeline {

std::optional<std::string> closest_name(std::string_view word,
                                        const std::vector<std::string>& candidates) {
  // Close enough: one edit for short words, a third of the word for longer ones.
  std::size_t limit = std::max<std::size_t>(1, word.size() / 3);
  const std::string* best = nullptr;
  std::size_t best_distance = limit + 1;
  for (const auto& c : candidates) {
    std::size_t d = edit_distance(word, c);
    if (d < best_distance && d < c.size()) {
      best = &c;
      best_distance = d;
    }
  }
  if (best == nullptr) return std::nullopt;
  return *best;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  auto best = closest_name(word, candidates);
  return best ? "did you mean '" + *best + "'?" : std::string();
}

} // namespace streamctl::pipeline
