#include <catch2/catch.hpp>

#include <limits>

#include "pipeline/spec/units.hpp"

using namespace streamctl::pipeline;

TEST_CASE("durations take an integer count and a unit", "[units]") {
  CHECK(parse_duration_ms("250ms") == 250);
  CHECK(parse_duration_ms("5s") == 5'000);
  CHECK(parse_duration_ms("2m") == 120'000);
  CHECK(parse_duration_ms("1h") == 3'600'000);
  CHECK(parse_duration_ms("1d") == 86'400'000);
  CHECK(parse_duration_ms("0") == 0);
  CHECK(parse_duration_ms("0s") == 0);
  CHECK(parse_duration_ms("007s") == 7'000);
}

TEST_CASE("bad durations are rejected", "[units]") {
  for (const char* bad : {"", "5", "s", "5 sec", "5 s", " 5s", "5s ", "1.5s", "-5s", "+5s", "5S",
                          "5ms5", "5sec", "5us", "ms"}) {
    INFO(bad);
    CHECK_FALSE(parse_duration_ms(bad).has_value());
  }
}

TEST_CASE("durations that overflow 64 bits are rejected, not wrapped", "[units]") {
  CHECK_FALSE(parse_duration_ms("9223372036854775808ms").has_value());
  CHECK_FALSE(parse_duration_ms("9223372036854775807s").has_value());
  CHECK(parse_duration_ms("9223372036854775807ms") == std::numeric_limits<std::int64_t>::max());
  CHECK_FALSE(parse_duration_ms("106751991167301d").has_value());
}

TEST_CASE("signed durations accept a leading minus, for join bounds", "[units]") {
  CHECK(parse_signed_duration_ms("-5s") == -5'000);
  CHECK(parse_signed_duration_ms("5s") == 5'000);
  CHECK_FALSE(parse_signed_duration_ms("--5s").has_value());
  CHECK_FALSE(parse_signed_duration_ms("-").has_value());
}

TEST_CASE("sizes use powers of 1000 for KB and of 1024 for KiB", "[units]") {
  CHECK(parse_size_bytes("100") == 100);
  CHECK(parse_size_bytes("512B") == 512);
  CHECK(parse_size_bytes("10KB") == 10'000);
  CHECK(parse_size_bytes("10MB") == 10'000'000);
  CHECK(parse_size_bytes("2GB") == 2'000'000'000);
  CHECK(parse_size_bytes("64KiB") == 64 * 1024);
  CHECK(parse_size_bytes("3MiB") == 3 * 1024 * 1024);
  CHECK(parse_size_bytes("1GiB") == std::int64_t{1} << 30);
  CHECK(parse_size_bytes("0") == 0);
}

TEST_CASE("bad sizes are rejected", "[units]") {
  for (const char* bad : {"", "KB", "10 MB", "1.5MB", "-1", "10kb", "10Kib", "10XB", "10MBs",
                          "99999999999999999999", "9000000000GiB"}) {
    INFO(bad);
    CHECK_FALSE(parse_size_bytes(bad).has_value());
  }
}
