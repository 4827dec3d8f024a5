#include "pipeline/spec/units.hpp"

#include <limits>

namespace streamctl::pipeline {

namespace {

struct Unit {
  std::string_view name;
  std::int64_t factor;
};

constexpr Unit duration_units[] = {
    {"ms", 1}, {"s", 1000}, {"m", 60'000}, {"h", 3'600'000}, {"d", 86'400'000},
};

constexpr std::int64_t kib = 1024;
constexpr Unit size_units[] = {
    {"", 1},
    {"B", 1},
    {"KB", 1000},
    {"MB", 1000 * 1000},
    {"GB", 1000 * 1000 * 1000},
    {"TB", std::int64_t{1000} * 1000 * 1000 * 1000},
    {"KiB", kib},
    {"MiB", kib* kib},
    {"GiB", kib* kib* kib},
    {"TiB", kib* kib* kib* kib},
};

// Splits "123unit" into its count and unit; nullopt when there are no leading digits or the
// count does not fit in an int64.
struct Count {
  std::int64_t value;
  std::string_view unit;
};

std::optional<Count> split_count(std::string_view text) {
  std::size_t k = 0;
  std::int64_t value = 0;
  constexpr auto max = std::numeric_limits<std::int64_t>::max();
  while (k < text.size() && text[k] >= '0' && text[k] <= '9') {
    int digit = text[k] - '0';
    if (value > (max - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
    ++k;
  }
  if (k == 0) return std::nullopt;
  return Count{value, text.substr(k)};
}

template <std::size_t N> std::optional<std::int64_t> scale(const Count& c, const Unit (&units)[N]) {
  for (const Unit& u : units) {
    if (u.name != c.unit) continue;
    if (c.value > std::numeric_limits<std::int64_t>::max() / u.factor) return std::nullopt;
    return c.value * u.factor;
  }
  return std::nullopt;
}

} // namespace

std::optional<std::int64_t> parse_duration_ms(std::string_view text) {
  auto c = split_count(text);
  if (!c) return std::nullopt;
  if (c->unit.empty()) return c->value == 0 ? std::optional<std::int64_t>(0) : std::nullopt;
  return scale(*c, duration_units);
}

std::optional<std::int64_t> parse_signed_duration_ms(std::string_view text) {
  if (!text.empty() && text.front() == '-') {
    auto v = parse_duration_ms(text.substr(1));
    if (!v) return std::nullopt;
    return -*v;
  }
  return parse_duration_ms(text);
}

std::optional<std::int64_t> parse_size_bytes(std::string_view text) {
  auto c = split_count(text);
  if (!c) return std::nullopt;
  return scale(*c, size_units);
}

} // namespace streamctl::pipeline
