#pragma once
// The scan that JSON reading and writing share: the first byte of a string that cannot be
// copied as it is. The reader stops there to unescape or check UTF-8, the writer to escape.

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

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

// In an 8-byte word read from memory (little-endian: byte k is bits 8k..8k+7), the high bit of
// each byte that json_special marks, and no other bit: '"', '\\', below 0x20, or 0x80 and above.
// Exact per byte (no borrow crosses bytes: each test works on 7-bit values).
inline std::uint64_t json_special_bytes(std::uint64_t w) {
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the byte order of the scan");
  constexpr std::uint64_t ones = 0x0101010101010101ULL;
  constexpr std::uint64_t high = 0x8080808080808080ULL;
  constexpr std::uint64_t low7 = 0x7F7F7F7F7F7F7F7FULL;
  const std::uint64_t v = w & low7; // each byte's low 7 bits: adding to it never carries out
  // A byte whose 7 bits equal c: x = v ^ c is 0..0x7F, and x + 0x7F has its high bit clear
  // exactly when x is zero.
  std::uint64_t quote = ~((v ^ ('"' * ones)) + low7) & high;
  std::uint64_t backslash = ~((v ^ ('\\' * ones)) + low7) & high;
  // A byte below 0x20: v + (0x80 - 0x20) has its high bit clear.
  std::uint64_t below_space = ~(v + 0x60 * ones) & high;
  // Bytes >= 0x80 have their own high bit; the 7-bit tests above ignore it, so a byte like
  // 0xA2 (low bits '"') is caught by the high bit anyway.
  return (below_space | quote | backslash | w) & high;
}

// The first byte in [p, end) that json_special marks, or end. 16 bytes at a time: as signed
// chars, the control and non-ASCII bytes are exactly those below 0x20, so one comparison finds
// both. Then 8 bytes at a time in a 64-bit word (most keys and values are shorter than 16
// bytes, and a byte loop over them was the reader's string cost), then byte by byte. Every
// load stays inside [p, end): no over-read, so a buffer needs no padding.
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
  while (end - p >= 8) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    std::uint64_t mask = json_special_bytes(w);
    if (mask != 0) return p + (__builtin_ctzll(mask) >> 3);
    p += 8;
  }
  while (p < end && !json_special[static_cast<unsigned char>(*p)]) ++p;
  return p;
}

// Whether the n bytes at a and b are equal: memcmp without a call into libc for the few bytes
// of a key (up to 16 bytes in at most two overlapping loads of each side).
inline bool equal_short(const char* a, const char* b, std::size_t n) {
  if (n >= 8) {
    if (n > 16) return std::memcmp(a, b, n) == 0;
    std::uint64_t a0, a1, b0, b1;
    std::memcpy(&a0, a, 8);
    std::memcpy(&a1, a + n - 8, 8);
    std::memcpy(&b0, b, 8);
    std::memcpy(&b1, b + n - 8, 8);
    return ((a0 ^ b0) | (a1 ^ b1)) == 0;
  }
  if (n >= 4) {
    std::uint32_t a0, a1, b0, b1;
    std::memcpy(&a0, a, 4);
    std::memcpy(&a1, a + n - 4, 4);
    std::memcpy(&b0, b, 4);
    std::memcpy(&b1, b + n - 4, 4);
    return ((a0 ^ b0) | (a1 ^ b1)) == 0;
  }
  for (std::size_t k = 0; k < n; ++k)
    if (a[k] != b[k]) return false;
  return true;
}

} // namespace streamctl::state
