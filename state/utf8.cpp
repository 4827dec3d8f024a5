#include "state/utf8.hpp"

#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace streamctl::state {

namespace {
bool is_continuation(unsigned char c) { return (c & 0xC0) == 0x80; }
} // namespace

std::size_t utf8_sequence_length(const char* p, const char* end) {
  auto b0 = static_cast<unsigned char>(p[0]);
  if (b0 < 0x80) return 1;
  auto left = end - p;
  // The range the second byte must fall in narrows for E0, ED, F0 and F4: that is what
  // excludes overlong forms, surrogates and code points above U+10FFFF.
  unsigned char low = 0x80;
  unsigned char high = 0xBF;
  std::size_t length = 0;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    length = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    length = 3;
    if (b0 == 0xE0) low = 0xA0;
    if (b0 == 0xED) high = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    length = 4;
    if (b0 == 0xF0) low = 0x90;
    if (b0 == 0xF4) high = 0x8F;
  } else {
    return 0; // a continuation byte, C0, C1 or F5..FF
  }
  if (left < static_cast<std::ptrdiff_t>(length)) return 0;
  auto b1 = static_cast<unsigned char>(p[1]);
  if (b1 < low || b1 > high) return 0;
  for (std::size_t k = 2; k < length; ++k)
    if (!is_continuation(static_cast<unsigned char>(p[k]))) return 0;
  return length;
}

std::string invalid_utf8_reason(unsigned char byte) {
  static constexpr char digits[] = "0123456789ABCDEF";
  return std::string("invalid UTF-8 (byte 0x") + digits[byte >> 4] + digits[byte & 15] + ")";
}

std::size_t find_invalid_utf8(std::string_view s) {
  const char* begin = s.data();
  const char* end = begin + s.size();
  const char* p = begin;
  while (p < end) {
#if defined(__SSE2__)
    while (end - p >= 16) {
      __m128i chunk = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
      int mask = _mm_movemask_epi8(chunk); // the high bit of each byte
      if (mask != 0) {
        p += __builtin_ctz(static_cast<unsigned>(mask));
        break;
      }
      p += 16;
    }
#endif
    while (p < end && static_cast<unsigned char>(*p) < 0x80) ++p;
    // A run of non-ASCII text (say, Cyrillic) is checked sequence by sequence before going
    // back to the 16-byte steps.
    while (p < end && static_cast<unsigned char>(*p) >= 0x80) {
      std::size_t n = utf8_sequence_length(p, end);
      if (n == 0) return static_cast<std::size_t>(p - begin);
      p += n;
    }
  }
  return std::string_view::npos;
}

} // namespace streamctl::state
