#pragma once
// UTF-8 validity, per RFC 3629: what every text input format requires of its lines (SPEC §4),
// and what the JSON writer guarantees of its output.
//
// Valid sequences are the shortest form of a code point up to U+10FFFF, surrogates excluded:
// overlong forms (C0, C1, E0 80..9F, F0 80..8F), UTF-8-encoded surrogates (ED A0..BF), bytes
// F5..FF, continuation bytes without a lead byte and sequences cut short are all invalid.

#include <cstddef>
#include <string>
#include <string_view>

namespace streamctl::state {

// The length (1 to 4) of the valid UTF-8 sequence that starts at `p`, or 0 when the bytes at
// `p` (p < end) do not start one. Never reads at or past `end`.
std::size_t utf8_sequence_length(const char* p, const char* end);

// The byte offset of the first byte of `s` that is not part of a valid UTF-8 sequence, or
// std::string_view::npos when all of `s` is valid. ASCII is checked 16 bytes at a time.
std::size_t find_invalid_utf8(std::string_view s);

inline bool is_valid_utf8(std::string_view s) { return find_invalid_utf8(s) == std::string_view::npos; }

// "invalid UTF-8 (byte 0xC0)": the reason every format gives for such a line (a caller adds
// " at column N").
std::string invalid_utf8_reason(unsigned char byte);

} // namespace streamctl::state
