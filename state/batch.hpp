#pragma once
// A batch of records: the unit that moves through operators and across processes.
//
// Records are spans of Fields stored in the batch's arena; string, array and map values point
// into that arena or into buffers the batch retains (a file chunk, a received message), so a
// source can hand out strings without copying them. A batch is filled by one thread and may
// then be moved to another; it is never shared while being written.

#include <cassert>
#include <climits>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "state/arena.hpp"
#include "state/value.hpp"

namespace streamctl::state {

// Event time of a record without one (processing time applies), as epoch milliseconds.
inline constexpr std::int64_t kNoTimestamp = INT64_MIN;

struct Record {
  const Field* fields = nullptr;
  std::uint32_t size = 0;
  // Event time, epoch ms, set by a source with `event_time`; carried with the record through
  // operators and across processes, as Flink's StreamRecord timestamp.
  std::int64_t timestamp = kNoTimestamp;

  const Field* begin() const { return fields; }
  const Field* end() const { return fields + size; }

  // Linear scan: records have few fields, and ids compare as integers.
  const Value* find(FieldId name) const {
    for (std::uint32_t k = 0; k < size; ++k)
      if (fields[k].name == name) return &fields[k].value;
    return nullptr;
  }
};

class Batch {
public:
  Batch() : arena_(std::make_shared<Arena>()) {}
  Batch(Batch&&) noexcept = default;
  Batch& operator=(Batch&&) noexcept = default;
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;

  std::size_t size() const { return records_.size(); }
  bool empty() const { return records_.empty(); }
  const Record& operator[](std::size_t k) const { return records_[k]; }
  auto begin() const { return records_.begin(); }
  auto end() const { return records_.end(); }

  Arena& arena() { return *arena_; }

  // Appends a record whose fields are copied into this batch's arena. Values are copied
  // shallowly: what they point to must be kept alive by this batch (arena or retain()).
  void add(std::span<const Field> fields, std::int64_t timestamp = kNoTimestamp) {
    Field* copy = arena_->allocate_array<Field>(fields.size());
    std::copy(fields.begin(), fields.end(), copy);
    records_.push_back(Record{copy, static_cast<std::uint32_t>(fields.size()), timestamp});
  }

  void set_timestamp(std::size_t k, std::int64_t timestamp) { records_[k].timestamp = timestamp; }

  // Appends a record whose fields were written in place in this batch's arena (InPlaceRecord).
  void add_in_place(const Field* fields, std::uint32_t size, std::int64_t timestamp) {
    records_.push_back(Record{fields, size, timestamp});
  }

  // Appends a record of another batch without copying; call retain_memory_of(other) once.
  void add_shared(const Record& record) { records_.push_back(record); }

  // Keeps `memory` alive as long as this batch, for values that point into it.
  // Retaining what was retained last does nothing (a source retains its table at every record).
  // By reference, so that a retain that does nothing costs no reference count.
  void retain(const std::shared_ptr<const void>& memory) {
    if (retained_.empty() || retained_.back() != memory) retained_.push_back(memory);
  }
  // Keeps everything `other` points into alive as long as this batch.
  void retain_memory_of(const Batch& other);

  // Deep-copies a value into this batch's arena (strings, arrays and maps included).
  Value copy_value(const Value& v);
  std::string_view copy_string(std::string_view s) { return arena_->copy(s); }

  // Drops the records and starts a fresh arena (the old one lives on in batches that share it).
  void clear() {
    records_.clear();
    retained_.clear();
    arena_ = std::make_shared<Arena>();
  }

  std::size_t memory_bytes() const { return arena_->bytes_reserved(); }

private:
  std::vector<Record> records_;
  std::shared_ptr<Arena> arena_;
  std::vector<std::shared_ptr<const void>> retained_;
};

// Builds one record straight in a batch's arena, where its fields stay: room for `max_fields`
// is taken up front (what is left unused is a few bytes of the arena). For sources that know
// their largest record (the generator): a RecordBuilder appends to scratch space out of line
// and copies the record at finish(), and its 16-byte loads of fields just stored piecewise
// stalled on store forwarding, a fifth of Nexmark q2's CPU.
class InPlaceRecord {
public:
  InPlaceRecord(Batch& out, std::uint32_t max_fields)
      : out_(out), fields_(out.arena().allocate_array<Field>(max_fields)), max_(max_fields) {}
  InPlaceRecord(const InPlaceRecord&) = delete;
  InPlaceRecord& operator=(const InPlaceRecord&) = delete;

  void append(FieldId name, Value value) {
    assert(size_ < max_ && "InPlaceRecord: more fields than reserved");
    fields_[size_].name = name;
    fields_[size_].value = value;
    ++size_;
  }
  void finish(std::int64_t timestamp = kNoTimestamp) { out_.add_in_place(fields_, size_, timestamp); }

private:
  Batch& out_;
  Field* fields_;
  std::uint32_t size_ = 0;
  [[maybe_unused]] std::uint32_t max_;
};

// Builds one record at a time in reusable scratch space, then appends it to a batch.
class RecordBuilder {
public:
  void reset() {
    fields_.clear();
    timestamp_ = kNoTimestamp;
  }
  void set_timestamp(std::int64_t timestamp) { timestamp_ = timestamp; }
  std::int64_t timestamp() const { return timestamp_; }
  void append(FieldId name, Value value) { fields_.push_back(Field{name, value}); }
  // Replaces the field if present, else appends it.
  void set(FieldId name, Value value) {
    for (auto& f : fields_)
      if (f.name == name) {
        f.value = value;
        return;
      }
    fields_.push_back(Field{name, value});
  }
  void remove(FieldId name) {
    for (std::size_t k = 0; k < fields_.size(); ++k)
      if (fields_[k].name == name) {
        fields_.erase(fields_.begin() + static_cast<std::ptrdiff_t>(k));
        return;
      }
  }
  void assign(const Record& r) {
    fields_.assign(r.begin(), r.end());
    timestamp_ = r.timestamp;
  }
  std::span<const Field> fields() const { return fields_; }
  std::vector<Field>& mutable_fields() { return fields_; }
  void finish(Batch& out) const { out.add(fields_, timestamp_); }

private:
  std::vector<Field> fields_;
  std::int64_t timestamp_ = kNoTimestamp;
};

} // namespace streamctl::state
