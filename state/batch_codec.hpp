#pragma once
// The binary encoding of a Batch that crosses process boundaries (the payload of a data-plane
// ZeroMQ message, after the transport's own header). Field ids are local to a process, so a
// batch carries the names it uses and the reader re-interns them once per batch.
//
// Byte order: fixed-width integers and floats are little-endian; "varint" is unsigned LEB128
// (7 bits a byte, low group first, high bit set on every byte but the last; at most 10 bytes);
// "zigzag" maps a signed n to (n << 1) ^ (n >> 63) before writing it as a varint.
//
//   batch:
//     +0  4 bytes   magic "SCTB"  (0x53 0x43 0x54 0x42)
//     +4  1 byte    version = 1
//     +5  varint    name_count
//         name_count times:
//           varint  byte length
//           bytes   the field name (any bytes, as interned)
//         varint    record_count
//         record_count times: a record
//     then, only when some record has an event time (Record::timestamp):
//         1 byte    'T' (0x54)
//         record_count times: zigzag varint, the record's timestamp minus the previous
//                   record's (the first minus 0), in wrapping 64-bit arithmetic; a record
//                   without an event time has kNoTimestamp (INT64_MIN)
//     (nothing else may follow the last record)
//
//   record:
//     varint        field_count
//     field_count times: a field
//
//   field:
//     varint        name index into this batch's name table (0-based)
//     value
//
//   value:
//     1 byte        kind tag = the numeric value of state::Kind
//     payload, by tag:
//       0 Null      nothing
//       1 Bool      1 byte: 0 = false, 1 = true (other values are corrupt)
//       2 Int       zigzag varint
//       3 Float     8 bytes: IEEE 754 binary64, little-endian
//       4 String    varint byte length, then the bytes (not NUL-terminated, any bytes)
//       5 Array     varint element count, then that many values
//       6 Map       varint member count, then that many fields (name index + value)
//
// Timestamps are a column of deltas at the end: in-order event times cost a byte or two each,
// and batches without event time pay nothing.
// A field's name index makes each name cost its bytes once per batch; a 5-field record of small
// values encodes to about 25-40 bytes. Nesting deeper than 256 levels is rejected by the reader
// (JSON sources stop at 128).
//
// Versions: the reader checks magic and version and rejects what it does not know. A change of
// layout bumps the version and keeps the reader of each older version beside the new one.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "state/batch.hpp"
#include "state/error.hpp"
#include "state/field_names.hpp"

namespace streamctl::state {

inline constexpr char batch_codec_magic[4] = {'S', 'C', 'T', 'B'};
inline constexpr std::uint8_t batch_codec_version = 1;
inline constexpr int batch_codec_max_depth = 256;

// Encodes with reusable scratch space (the map from FieldId to name index). Not thread-safe:
// one encoder per thread.
class BatchEncoder {
public:
  // Appends the encoding of `batch` to `out`; reuses out's capacity. With `keep` (by FieldId),
  // only the top-level fields it marks are written (projection pushdown: the fields the
  // receiver reads); a FieldId beyond its size is dropped.
  void encode(const Batch& batch, const FieldNames& names, std::string& out,
              const std::vector<bool>* keep = nullptr);

  // encode() in two steps, for writing straight into memory the caller allocates (a ZeroMQ
  // message, without a copy): bound() returns a bound of the encoded size (it collects the
  // name table), then write() writes the encoding into `out`, which has room for that bound,
  // and returns the bytes written. write() must follow bound() for the same batch and names,
  // and `keep` must outlive it.
  std::size_t bound(const Batch& batch, const FieldNames& names,
                    const std::vector<bool>* keep = nullptr);
  std::size_t write(const Batch& batch, const FieldNames& names, char* out);

private:
  std::size_t collect(const Value& v);
  std::size_t collect_container(const Value& v);
  void index_of(FieldId id);
  static char* put_timestamps(const Batch& batch, char* p);

  std::vector<std::uint32_t> index_plus_one_; // by FieldId: name index + 1, 0 when unused
  std::vector<FieldId> used_;                 // name table, in order of first use
  const std::vector<bool>* keep_ = nullptr;   // of the last bound()
  bool timestamps_ = false;                   // whether the last bound() saw an event time
};

// Appends the encoding of `batch` to `out` (uses a thread-local BatchEncoder).
void encode_batch(const Batch& batch, const FieldNames& names, std::string& out,
                  const std::vector<bool>* keep = nullptr);

// Decodes a batch. Zero copy: string values point into `bytes`, and the batch retains `owner`,
// which must keep `bytes` alive (pass nullptr only if the caller keeps it alive longer than the
// batch). Every length and count is checked against the bytes that remain: corrupt or truncated
// input gives a failure, never an out-of-bounds read or a huge allocation (the arena holds at
// most one Value or Field per input byte). The names of a batch that fails may already have
// been interned into `names`.
Result<Batch> decode_batch(std::string_view bytes, std::shared_ptr<const void> owner,
                           FieldNames& names);

} // namespace streamctl::state
