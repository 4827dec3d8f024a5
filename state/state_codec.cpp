#include "state/state_codec.hpp"

#include "state/arena.hpp"
#include "state/batch_codec.hpp"
#include "state/key_codec.hpp"

namespace streamctl::state {

void StateWriter::varint(std::uint64_t v) {
  while (v >= 0x80) {
    out_.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out_.push_back(static_cast<char>(v));
}

void StateWriter::records(const Batch& batch, const FieldNames& names) {
  scratch_.clear();
  encode_batch(batch, names, scratch_);
  bytes(scratch_);
}

void StateWriter::timers(const TimerService& timers, std::uint32_t key_group) {
  std::uint64_t n = 0;
  timers.for_each_in_group(key_group, [&](const TimerView&) { ++n; });
  varint(n);
  timers.for_each_in_group(key_group, [&](const TimerView& t) {
    u8(static_cast<std::uint8_t>(t.domain));
    bytes(t.key);
    zigzag(t.timestamp);
    zigzag(t.tag);
  });
}

bool StateReader::u8(std::uint8_t& v) {
  if (in_.empty()) return fail("truncated");
  v = static_cast<std::uint8_t>(in_.front());
  in_.remove_prefix(1);
  return true;
}

bool StateReader::varint(std::uint64_t& v) {
  v = 0;
  for (unsigned shift = 0; shift < 70; shift += 7) {
    if (in_.empty()) return fail("truncated");
    const auto byte = static_cast<unsigned char>(in_.front());
    in_.remove_prefix(1);
    if (shift == 63 && (byte & 0x7E) != 0) return fail("varint out of range");
    v |= std::uint64_t{byte & 0x7Fu} << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return fail("varint longer than 10 bytes");
}

bool StateReader::zigzag(std::int64_t& v) {
  std::uint64_t u;
  if (!varint(u)) return false;
  v = static_cast<std::int64_t>(u >> 1) ^ -static_cast<std::int64_t>(u & 1);
  return true;
}

bool StateReader::bytes(std::string_view& b) {
  std::uint64_t n;
  if (!varint(n)) return false;
  if (n > in_.size()) return fail("truncated (a length of " + std::to_string(n) + " bytes with " +
                                  std::to_string(in_.size()) + " left)");
  b = in_.substr(0, n);
  in_.remove_prefix(n);
  return true;
}

bool StateReader::count(std::uint64_t& n, std::size_t min_item_bytes) {
  if (!varint(n)) return false;
  if (min_item_bytes > 0 && n > in_.size() / min_item_bytes)
    return fail("a count of " + std::to_string(n) + " items with only " +
                std::to_string(in_.size()) + " bytes left");
  return true;
}

bool StateReader::header(char kind) {
  std::uint8_t version = 0, tag = 0;
  if (!u8(version)) return false;
  if (version != state_format_version)
    return fail("unknown state format version " + std::to_string(version) + " (this build reads " +
                std::to_string(state_format_version) + ")");
  if (!u8(tag)) return false;
  if (tag != static_cast<std::uint8_t>(kind))
    return fail(std::string("state of another kind of operator (tag '") +
                static_cast<char>(tag >= 0x20 && tag < 0x7F ? tag : '?') + "', expected '" + kind +
                "')");
  return true;
}

bool StateReader::records(FieldNames& names, Batch& out) {
  std::string_view b;
  if (!bytes(b)) return false;
  auto decoded = decode_batch(b, nullptr, names);
  if (!decoded) return fail("bad records: " + decoded.error());
  out = std::move(*decoded);
  return true;
}

bool StateReader::timers(std::vector<StoredTimer>& out) {
  std::uint64_t n;
  if (!count(n, 4)) return false;
  out.clear();
  out.reserve(n);
  for (std::uint64_t k = 0; k < n; ++k) {
    std::uint8_t domain = 0;
    StoredTimer t{};
    if (!u8(domain)) return false;
    if (domain > 1) return fail("bad timer domain " + std::to_string(domain));
    t.domain = static_cast<TimeDomain>(domain);
    if (!bytes(t.key) || !zigzag(t.timestamp) || !zigzag(t.tag)) return false;
    out.push_back(t);
  }
  return true;
}

bool valid_key_bytes(std::string_view bytes, FieldNames& names) {
  thread_local Arena arena(1024);
  thread_local std::vector<Value> values;
  arena.reset();
  return decode_key_into(bytes, names, arena, values).ok();
}

} // namespace streamctl::state
