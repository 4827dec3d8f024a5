#pragma once
// The canonical byte encoding of a key: the tuple of values of an operator's `key = [...]`
// fields. Keyed state and timers are stored under these bytes, their XXH3 hash picks the key
// group (key_group.hpp), and snapshots carry them; so two keys are the same key exactly when
// their encodings are equal, and the encoding must never change without a new snapshot format
// version (a change moves keys to other key groups).
//
// Byte order: "varint" is unsigned LEB128, little-endian groups (7 bits a byte, low group
// first, high bit set on every byte but the last), in its shortest form (at most 10 bytes; a
// last byte of 0 after the first is never written); "zigzag" maps a signed n to
// (n << 1) ^ (n >> 63) before writing it as a varint. Fixed-width fields are little-endian.
//
//   key:
//     varint        value_count (the number of key fields)
//     value_count values
//
//   value:
//     1 byte        tag (the same numbers as the batch codec's kind tags)
//     payload, by tag:
//       0 null      nothing (null is a key value of its own, distinct from every other)
//       1 bool      1 byte: 0 = false, 1 = true
//       2 int       zigzag varint. Also every float that is finite, integral and in
//                   [-2^63, 2^63): 2 and 2.0 (and -0.0 and 0) are one key
//       3 float     8 bytes: IEEE 754 binary64, little-endian; only for floats that tag 2
//                   cannot hold (fractions, |x| >= 2^63, infinities); every NaN is written as
//                   the quiet NaN 0x7FF8000000000000, so NaN keys group together
//       4 string    varint byte length, then the bytes as they are (no normalisation)
//       5 array     varint element count, then that many values
//       6 map       varint member count, then the members in ascending order of name bytes
//                   (unsigned lexicographic; members of equal name keep their order), each:
//                     varint name byte length, the name bytes, then a value
//
// Example: the key ["u123456"] is 01 04 07 'u' '1' '2' '3' '4' '5' '6' (10 bytes); [2] and
// [2.0] are both 01 02 04.
//
// The encoding is self-delimiting (a reader knows where a key ends without an outer length)
// and canonical: decode_key accepts exactly the bytes encode_key can produce, so
// encode(decode(b)) == b for every accepted b. Decoding gives back ints for integral floats.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "state/arena.hpp"
#include "state/byte_scratch.hpp"
#include "state/error.hpp"
#include "state/field_names.hpp"
#include "state/value.hpp"

namespace streamctl::state {

// Deeper nesting is rejected by the decoder; the encoder asserts it (records from the JSON
// reader stop at 128).
inline constexpr int key_codec_max_depth = 256;

// Replaces the contents of `out` with the encoding of `key` (out's capacity is reused, so a
// scratch string kept per operator makes this allocation-free). Map member names are looked up
// in `names`. Thread-safe as long as `names` is not modified concurrently.
void encode_key(std::span<const Value> key, const FieldNames& names, std::string& out);
// encode_key() that appends the encoding to `out`, keeping what it holds: a batch's keys can be
// written one after another into one buffer without a copy each.
void append_key(std::span<const Value> key, const FieldNames& names, std::string& out);
// The same bytes appended to a ByteScratch (no zero-filling of the bound it writes into).
void append_key(std::span<const Value> key, const FieldNames& names, ByteScratch& out);
// append_key() of a key of one value (the same bytes as of a span of it): the common
// `key = ["user"]`, written without a pass over a span to bound it first.
void append_key(const Value& only, const FieldNames& names, ByteScratch& out);

// Decodes key bytes back into values, e.g. to put the key fields into an output record.
// Strings, arrays and maps are copied into `arena` (the result does not point into `bytes`);
// map member names are interned into `names`. Malformed, truncated or non-canonical bytes, or
// bytes after the key, give a failure, never a crash or an allocation larger than the input.
Result<std::vector<Value>> decode_key(std::string_view bytes, FieldNames& names, Arena& arena);
// decode_key() into `values` (replacing what it held), reusing its capacity: a restore checks
// every key it reads, and a vector allocated and freed per key was 7% of restoring a window.
Result<void> decode_key_into(std::string_view bytes, FieldNames& names, Arena& arena,
                             std::vector<Value>& values);

} // namespace streamctl::state
