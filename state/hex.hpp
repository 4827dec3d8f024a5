#pragma once
// A 64-bit hash or checksum as 16 lower-case hex digits, zero-padded: how snapshot files,
// uploads and `_metadata` write their XXH64 digests, so one digest reads the same everywhere.

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <string>

namespace streamctl::state {

inline std::string hex64(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

} // namespace streamctl::state
