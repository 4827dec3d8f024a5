#pragma once
// Processing time for expressions' now(): wall-clock epoch milliseconds.

#include <chrono>
#include <cstdint>

namespace streamctl::operators {

inline std::int64_t wall_clock_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

} // namespace streamctl::operators
