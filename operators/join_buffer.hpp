#pragma once
// The records a join holds for one side of one key (and, in a window join, one window): owned
// copies of the records, encoded one after another into one byte string and kept sorted by
// their time, so that
//   - the memory of a key's records is one allocation that grows geometrically (no allocation
//     per stored record) and is freed when the buffer is dropped or emptied;
//   - an interval join drops expired records from the front (records expire in time order) and
//     probes only the records within its bounds;
//   - a snapshot can write the bytes of each buffer of a key group as they are, after mapping
//     field ids to names (below).
//
// Layout of the byte string, in host byte order (memory only, never written to disk as is):
//
//   [garbage: head() bytes of dropped records, erased from time to time]
//   entry, entry, ...   in ascending order of time; equal times keep their arrival order
//
//   entry:
//     +0     8 bytes   time: the record's event time, or the processing time it arrived at
//     +8     4 bytes   n = length of the body
//     +12    n bytes   body
//     +12+n  4 bytes   n again, so that an insertion can walk back from the end
//
//   body:
//     varint           field count
//     per field:
//       varint         FieldId of the name (this process's FieldNames)
//       value
//
//   value (the batch codec's value, state/batch_codec.hpp, with map member names as FieldIds):
//     1 byte           state::Kind
//     Null             nothing
//     Bool             1 byte, 0 or 1
//     Int              zigzag varint
//     Float            8 bytes, IEEE 754 binary64
//     String           varint byte length, the bytes
//     Array            varint element count, the values
//     Map              varint member count, per member: varint FieldId, value
//
// "varint" is unsigned LEB128 (7 bits a byte, low group first); "zigzag" maps n to
// (n << 1) ^ (n >> 63). FieldIds are local to a process: a snapshot writes each body with the
// names themselves (decode_stored_record into a batch, then the batch codec), and a restore
// re-encodes.
//
// Not thread-safe: a buffer belongs to one subtask thread.

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "state/arena.hpp"
#include "state/batch.hpp"

namespace streamctl::operators {

class RecordBuffer {
public:
  RecordBuffer() = default;
  RecordBuffer(RecordBuffer&&) noexcept = default;
  RecordBuffer& operator=(RecordBuffer&&) noexcept = default;

  // Stores a deep copy of `record` under `time`, after the records of equal or smaller time.
  void add(std::int64_t time, const state::Record& record);

  bool empty() const { return head_ == bytes_.size(); }
  std::size_t size() const { return count_; }
  // The smallest time held; requires !empty().
  std::int64_t front_time() const { return read_i64(head_); }

  // Drops the records whose time is <= `time`; returns how many.
  std::size_t drop_through(std::int64_t time);

  // Visits the records with from <= time <= to, in time order: f(time, body). `body` is valid
  // until the buffer changes; decode it with decode_stored_record.
  template <typename F> void for_each_in(std::int64_t from, std::int64_t to, F&& f) const {
    for (std::size_t at = head_; at < bytes_.size();) {
      std::int64_t time = read_i64(at);
      std::uint32_t n = read_u32(at + 8);
      if (time > to) break;
      if (time >= from) f(time, std::string_view(bytes_.data() + at + 12, n));
      at += entry_overhead + n;
    }
  }
  template <typename F> void for_each(F&& f) const { for_each_in(INT64_MIN, INT64_MAX, f); }

  // Heap bytes held (the string's capacity when it is on the heap).
  std::size_t heap_bytes() const { return bytes_.capacity() > 15 ? bytes_.capacity() + 1 : 0; }

private:
  static constexpr std::size_t entry_overhead = 16; // time, n, n again

  std::int64_t read_i64(std::size_t at) const {
    std::int64_t v;
    std::memcpy(&v, bytes_.data() + at, 8);
    return v;
  }
  std::uint32_t read_u32(std::size_t at) const {
    std::uint32_t v;
    std::memcpy(&v, bytes_.data() + at, 4);
    return v;
  }
  void compact();

  std::string bytes_;
  std::size_t head_ = 0; // offset of the first live entry
  std::size_t count_ = 0;
};

// Decodes a body that RecordBuffer stored into a record whose fields, strings, arrays and maps
// all live in `arena`, with `timestamp` as its event time.
state::Record decode_stored_record(std::string_view body, std::int64_t timestamp,
                                   state::Arena& arena);

} // namespace streamctl::operators
