#pragma once
// Durations and sizes as written in a pipeline file (SPEC §3).
//
// Durations: a non-negative integer count and a unit, nothing between them: "250ms", "5s",
// "2m", "1h", "1d"; "0" alone is zero. No fractions ("1.5s"), no spaces, no sign: a "-5s" is
// only meaningful for join bounds, which read it with parse_signed_duration_ms.
// Sizes: a non-negative integer count and an optional unit: "512B" or "100" (bytes), "10KB",
// "10MB", "10GB", "1TB" (powers of 1000), "64KiB", "1MiB", "1GiB", "1TiB" (powers of 1024).
// Units are case-sensitive. Every parser returns nullopt on bad text or on overflow.

#include <cstdint>
#include <optional>
#include <string_view>

namespace streamctl::pipeline {

std::optional<std::int64_t> parse_duration_ms(std::string_view text);
// The same, with an optional leading '-'.
std::optional<std::int64_t> parse_signed_duration_ms(std::string_view text);
std::optional<std::int64_t> parse_size_bytes(std::string_view text);

// What to tell a user whose text did not parse, after "bad duration '...': ".
inline constexpr const char* duration_help = "use a number and a unit: ms, s, m, h, d";
inline constexpr const char* size_help = "use a number and a unit: B, KB, MB, GB, KiB, MiB, GiB";

} // namespace streamctl::pipeline
