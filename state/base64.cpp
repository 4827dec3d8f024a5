#include "state/base64.hpp"

#include <cstdint>

namespace streamctl::state {

void append_base64(std::string_view bytes, std::string& out) {
  static constexpr char alphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  out.reserve(out.size() + (bytes.size() + 2) / 3 * 4);
  std::size_t k = 0;
  auto byte = [&](std::size_t i) { return static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i])); };
  for (; k + 3 <= bytes.size(); k += 3) {
    std::uint32_t v = byte(k) << 16 | byte(k + 1) << 8 | byte(k + 2);
    out += alphabet[v >> 18];
    out += alphabet[(v >> 12) & 63];
    out += alphabet[(v >> 6) & 63];
    out += alphabet[v & 63];
  }
  std::size_t left = bytes.size() - k;
  if (left == 0) return;
  std::uint32_t v = byte(k) << 16 | (left == 2 ? byte(k + 1) << 8 : 0);
  out += alphabet[v >> 18];
  out += alphabet[(v >> 12) & 63];
  out += left == 2 ? alphabet[(v >> 6) & 63] : '=';
  out += '=';
}

} // namespace streamctl::state
