#pragma once
// The scan that JSON reading and writing share: the first byte of a string that cannot be
// copied as it is. The reader stops there to unescape or check UTF-8, the writer to escape.

#include <array>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace streamctl::state {

// '"', '\\', a control character (0x00..0x1F) or a non-ASCII byte (0x80..0xFF).
constexpr std::array<bool, 256> make_json_special() {
  std::array<bool, 256> t{};
  for (int c = 0; c < 0x20; ++c) t[static_cast<std::size_t>(c)] = true;
  for (int c = 0x80; c < 0x100; ++c) t[static_cast<std::size_t>(c)] = true;
  t['"'] = true;
  t['\\'] = true;
  return t;
}
inline constexpr std::array<bool, 256> json_special = make_json_special();

// The first byte in [p, end) that json_special marks, or end. 16 bytes at a time: as signed
// chars, the control and non-ASCII bytes are exactly those below 0x20, so one comparison finds
// both. The loads stay inside [p, end).
inline const char* find_json_special(const char* p, const char* end) {
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i backslash = _mm_set1_epi8('\\');
  const __m128i space = _mm_set1_epi8(0x20);
  while (end - p >= 16) {
    __m128i chunk = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    int mask = _mm_movemask_epi8(_mm_or_si128(
        _mm_or_si128(_mm_cmpeq_epi8(chunk, quote), _mm_cmpeq_epi8(chunk, backslash)),
        _mm_cmplt_epi8(chunk, space)));
    if (mask != 0) return p + __builtin_ctz(static_cast<unsigned>(mask));
    p += 16;
  }
#endif
  while (p < end && !json_special[static_cast<unsigned char>(*p)]) ++p;
  return p;
}

} // namespace streamctl::state
