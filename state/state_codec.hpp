#pragma once
// Helpers for the checkpointed state of operators (operators/operator.hpp, "Checkpointed
// state"): the bytes of a key-group segment or of a subtask's state.
//
// Byte order: "varint" is unsigned LEB128 (as state/key_codec.hpp), at most 10 bytes; "zigzag"
// maps a signed n to (n << 1) ^ (n >> 63) before writing it as a varint; "bytes" is a varint
// length then the bytes. Every segment starts with
//     1 byte   state_format_version (1)
//     1 byte   the operator's kind tag (an ASCII letter, see each operator)
// so that restoring a segment into another kind of operator fails cleanly.
//
// Records (join buffers) are written WITH their field names: "records" is a varint byte length,
// then a batch in the batch codec's format (state/batch_codec.hpp: magic, version, its own name
// table), each record stamped with its time. FieldIds are local to a process; the reader
// re-interns the names.
//
// Timers (TimerService::for_each_in_group) are written as
//     varint   count
//     count times: 1 byte domain (0 event time, 1 processing time), bytes key,
//                  zigzag timestamp, zigzag tag
// and the hash of each is recomputed on restore by the operator, as it does on insert.
//
// StateReader checks every length against what remains: truncated or corrupt input gives
// false (and a reason), never a read out of bounds or an allocation larger than the input.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "state/batch.hpp"
#include "state/error.hpp"
#include "state/field_names.hpp"
#include "state/timer_service.hpp"

namespace streamctl::state {

inline constexpr std::uint8_t state_format_version = 1;

class StateWriter {
public:
  explicit StateWriter(std::string& out) : out_(out) {}
  void u8(std::uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void varint(std::uint64_t v);
  void zigzag(std::int64_t v) {
    varint((static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63));
  }
  void bytes(std::string_view b) {
    varint(b.size());
    out_.append(b);
  }
  void raw(std::string_view b) { out_.append(b); }
  // The version byte and the operator's kind tag.
  void header(char kind) {
    u8(state_format_version);
    u8(static_cast<std::uint8_t>(kind));
  }
  // The records of `batch`, with their field names and timestamps (see the top of the file).
  void records(const Batch& batch, const FieldNames& names);
  // The timers of one key group.
  void timers(const TimerService& timers, std::uint32_t key_group);
  std::string& out() { return out_; }

private:
  std::string& out_;
  std::string scratch_;
};

// A timer as read back; `key` points into the reader's input.
struct StoredTimer {
  TimeDomain domain;
  std::string_view key;
  std::int64_t timestamp;
  std::int64_t tag;
};

class StateReader {
public:
  explicit StateReader(std::string_view in) : in_(in) {}
  bool u8(std::uint8_t& v);
  bool varint(std::uint64_t& v);
  bool zigzag(std::int64_t& v);
  bool bytes(std::string_view& b);
  // A count of items that each take at least `min_item_bytes` bytes: refused when the rest of
  // the input cannot hold them (so that no caller reserves memory for a corrupt count).
  bool count(std::uint64_t& n, std::size_t min_item_bytes = 1);
  // Checks the version byte and the kind tag; the failure names `what`.
  bool header(char kind);
  bool records(FieldNames& names, Batch& out);
  bool timers(std::vector<StoredTimer>& out);
  bool at_end() const { return in_.empty(); }
  std::size_t remaining() const { return in_.size(); }
  std::string_view rest() const { return in_; }
  void skip(std::size_t n) { in_.remove_prefix(n); }

  // Why the last read failed ("truncated", ...).
  const std::string& error() const { return error_; }
  bool fail(std::string reason) {
    if (error_.empty()) error_ = std::move(reason);
    return false;
  }

private:
  std::string_view in_;
  std::string error_;
};

// Whether `bytes` is a key as state::encode_key writes it (canonical, nothing after it).
bool valid_key_bytes(std::string_view bytes, FieldNames& names);

} // namespace streamctl::state
