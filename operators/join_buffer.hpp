#pragma once
// The records a join holds for one side of one key (and, in a window join, one window): owned
// copies of the records, encoded one after another into one byte string in arrival order,
// with an index of (time, offset) entries kept sorted by time, so that
//   - the memory of a key's records is two allocations that grow geometrically (no
//     allocation per stored record) and are freed when the buffer is dropped or emptied;
//   - an interval join drops expired records from the front of the index (records expire in
//     time order) and probes only the records within its bounds (a binary search);
//   - records that arrive out of time order cost nothing at arrival: the index is sorted when
//     it is next read (a sort of the new entries and a merge), which matters when a subtask
//     reads several upstream channels whose batches interleave in time — walking and
//     rotating the bytes at every such arrival took 60% of Nexmark q4's CPU at parallelism 2.
//
// Layout (memory only, never written to disk as is):
//
//   bytes_:   [body length varint, body] per stored record, in arrival order; the bodies of
//             dropped records stay until they are most of the string, then the live ones are
//             copied into a new string
//   entries_: {time, offset of the body length in bytes_}; entries_[head_, end) are live and,
//             once sorted, in ascending time; equal times keep their arrival order
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

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

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

  bool empty() const { return head_ == entries_.size(); }
  std::size_t size() const { return entries_.size() - head_; }
  // The smallest time held; requires !empty().
  std::int64_t front_time() const {
    sort_new_entries();
    return entries_[head_].time;
  }

  // Drops the records whose time is <= `time`; returns how many.
  std::size_t drop_through(std::int64_t time);

  // Visits the records with from <= time <= to, in time order: f(time, body). `body` is valid
  // until the buffer changes; decode it with decode_stored_record.
  template <typename F> void for_each_in(std::int64_t from, std::int64_t to, F&& f) const {
    sort_new_entries();
    auto at = std::lower_bound(entries_.begin() + static_cast<std::ptrdiff_t>(head_),
                               entries_.end(), from,
                               [](const Entry& e, std::int64_t t) { return e.time < t; });
    for (; at != entries_.end() && at->time <= to; ++at)
      f(at->time, body_at(at->offset));
  }
  template <typename F> void for_each(F&& f) const { for_each_in(INT64_MIN, INT64_MAX, f); }

  // Heap bytes held (the string's capacity when it is on the heap, and the index's).
  std::size_t heap_bytes() const {
    return (bytes_.capacity() > 15 ? bytes_.capacity() + 1 : 0) +
           entries_.capacity() * sizeof(Entry);
  }

private:
  struct Entry {
    std::int64_t time;
    std::uint64_t offset;
  };

  // The body whose length varint starts at `offset`.
  std::string_view body_at(std::uint64_t offset) const;
  // Sorts entries added out of time order into place; const because it changes no content.
  void sort_new_entries() const;
  void compact();

  std::string bytes_;
  // Mutable for sort_new_entries: the order of the index is not part of the buffer's value.
  mutable std::vector<Entry> entries_;
  std::size_t head_ = 0;            // entries_[head_] is the first live entry
  mutable std::size_t sorted_ = 0;  // entries_[head_, sorted_) are in time order
  std::size_t live_bytes_ = 0;      // bytes_ of live entries, length varints included
};

// Decodes a body that RecordBuffer stored into a record whose fields, strings, arrays and maps
// all live in `arena`, with `timestamp` as its event time.
state::Record decode_stored_record(std::string_view body, std::int64_t timestamp,
                                   state::Arena& arena);

} // namespace streamctl::operators
