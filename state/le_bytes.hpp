#pragma once
// Fixed-width little-endian integers appended to a string in one append. A push_back per byte
// checks the capacity and writes a terminator each time: a count's partial aggregate spent
// about 150 instructions on its eight bytes (issue 9, the keyed exchange's serialising).

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

namespace streamctl::state {

template <typename T> void append_le(std::string& out, T v) {
  static_assert(std::is_unsigned_v<T>, "append_le takes an unsigned width");
  char bytes[sizeof(T)];
  for (std::size_t k = 0; k < sizeof(T); ++k) bytes[k] = static_cast<char>(v >> (8 * k));
  out.append(bytes, sizeof(T));
}

} // namespace streamctl::state
