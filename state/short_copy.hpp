#pragma once
// copy_short(): memcpy for the few bytes of a key or a field name. A memcpy of a size unknown
// at compile time is a call into libc's memmove; for the 1 to 16 bytes that keys mostly are,
// the call costs more than the copy, and a keyed operator makes several per record (in a
// dense window count they were about a tenth of the CPU time).

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace streamctl::state {

// Copies n bytes from `from` to `to` (not overlapping): up to 16 bytes in at most two loads and
// two stores of a fixed size, which may overlap each other; more by memcpy.
inline void copy_short(char* to, const char* from, std::size_t n) {
  if (n >= 8) {
    if (n > 16) {
      std::memcpy(to, from, n);
      return;
    }
    std::uint64_t head, tail;
    std::memcpy(&head, from, 8);
    std::memcpy(&tail, from + n - 8, 8);
    std::memcpy(to, &head, 8);
    std::memcpy(to + n - 8, &tail, 8);
  } else if (n >= 4) {
    std::uint32_t head, tail;
    std::memcpy(&head, from, 4);
    std::memcpy(&tail, from + n - 4, 4);
    std::memcpy(to, &head, 4);
    std::memcpy(to + n - 4, &tail, 4);
  } else if (n > 0) {
    to[0] = from[0];
    to[n / 2] = from[n / 2];
    to[n - 1] = from[n - 1];
  }
}

} // namespace streamctl::state
