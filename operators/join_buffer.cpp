#include "operators/join_buffer.hpp"

#include <algorithm>

#include "state/key_group.hpp"

namespace streamctl::operators {

namespace {

void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

template <typename T> void put_raw(std::string& out, T v) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));
  out.append(bytes, sizeof(T));
}

void put_value(std::string& out, const state::Value& v) {
  out.push_back(static_cast<char>(v.kind));
  switch (v.kind) {
  case state::Kind::Null: break;
  case state::Kind::Bool: out.push_back(v.b ? 1 : 0); break;
  case state::Kind::Int: {
    auto u = static_cast<std::uint64_t>(v.i);
    put_varint(out, (u << 1) ^ static_cast<std::uint64_t>(v.i >> 63));
    break;
  }
  case state::Kind::Float: put_raw(out, v.f); break;
  case state::Kind::String:
    put_varint(out, v.size);
    out.append(v.s, v.size);
    break;
  case state::Kind::Array:
    put_varint(out, v.size);
    for (std::uint32_t k = 0; k < v.size; ++k)
      put_value(out, v.array[k]);
    break;
  case state::Kind::Map:
    put_varint(out, v.size);
    for (std::uint32_t k = 0; k < v.size; ++k) {
      put_varint(out, v.map[k].name);
      put_value(out, v.map[k].value);
    }
    break;
  }
}

// Reads what put_* wrote. The bytes were written by this process, so they are trusted: no
// bounds checks beyond an assertion that the body was consumed exactly.
class Reader {
public:
  Reader(std::string_view bytes, state::Arena& arena) : p_(bytes.data()), arena_(arena) {}

  std::uint64_t varint() {
    std::uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      auto byte = static_cast<std::uint8_t>(*p_++);
      v |= std::uint64_t{byte & 0x7Fu} << shift;
      if ((byte & 0x80) == 0) return v;
    }
  }

  state::Value value() {
    auto kind = static_cast<state::Kind>(*p_++);
    switch (kind) {
    case state::Kind::Null: return state::Value::null();
    case state::Kind::Bool: return state::Value::boolean(*p_++ != 0);
    case state::Kind::Int: {
      std::uint64_t z = varint();
      return state::Value::integer(static_cast<std::int64_t>((z >> 1) ^ (~(z & 1) + 1)));
    }
    case state::Kind::Float: {
      double f;
      std::memcpy(&f, p_, 8);
      p_ += 8;
      return state::Value::floating(f);
    }
    case state::Kind::String: {
      auto n = static_cast<std::size_t>(varint());
      std::string_view s = arena_.copy(std::string_view(p_, n));
      p_ += n;
      return state::Value::string(s);
    }
    case state::Kind::Array: {
      auto n = static_cast<std::uint32_t>(varint());
      state::Value* elements = arena_.allocate_array<state::Value>(n);
      for (std::uint32_t k = 0; k < n; ++k)
        ::new (&elements[k]) state::Value(value());
      return state::Value::array_of(elements, n);
    }
    case state::Kind::Map: {
      auto n = static_cast<std::uint32_t>(varint());
      state::Field* members = fields(n);
      return state::Value::map_of(members, n);
    }
    }
    STREAMCTL_STATE_ASSERT(false, "corrupt join buffer: unknown value kind");
    return state::Value::null();
  }

  state::Field* fields(std::uint32_t n) {
    state::Field* out = arena_.allocate_array<state::Field>(n);
    for (std::uint32_t k = 0; k < n; ++k) {
      auto name = static_cast<state::FieldId>(varint());
      ::new (&out[k]) state::Field{name, value()};
    }
    return out;
  }

  const char* position() const { return p_; }

private:
  const char* p_;
  state::Arena& arena_;
};

} // namespace

void RecordBuffer::add(std::int64_t time, const state::Record& record) {
  // The body is encoded after a one-byte placeholder for its length varint, which is
  // widened (moving the body) only for bodies of 128 bytes or more.
  const std::size_t offset = bytes_.size();
  bytes_.push_back('\0');
  put_varint(bytes_, record.size);
  for (const auto& field : record) {
    put_varint(bytes_, field.name);
    put_value(bytes_, field.value);
  }
  const std::size_t body = bytes_.size() - offset - 1;
  STREAMCTL_STATE_ASSERT(body <= UINT32_MAX, "a record of more than 4 GiB in a join");
  char length[10];
  std::size_t length_size = 0;
  for (std::uint64_t v = body; ; v >>= 7) {
    length[length_size++] = static_cast<char>((v & 0x7F) | (v >= 0x80 ? 0x80 : 0));
    if (v < 0x80) break;
  }
  if (length_size > 1) bytes_.insert(offset + 1, length_size - 1, '\0');
  std::memcpy(bytes_.data() + offset, length, length_size);
  live_bytes_ += length_size + body;

  const bool in_order = sorted_ == entries_.size() &&
                        (empty() || entries_.back().time <= time);
  entries_.push_back(Entry{time, offset});
  if (in_order) sorted_ = entries_.size();
}

std::string_view RecordBuffer::body_at(std::uint64_t offset) const {
  const char* p = bytes_.data() + offset;
  std::uint64_t n = 0;
  for (int shift = 0;; shift += 7) {
    auto byte = static_cast<std::uint8_t>(*p++);
    n |= std::uint64_t{byte & 0x7Fu} << shift;
    if ((byte & 0x80) == 0) break;
  }
  return {p, static_cast<std::size_t>(n)};
}

void RecordBuffer::sort_new_entries() const {
  if (sorted_ == entries_.size()) return;
  const auto by_time = [](const Entry& a, const Entry& b) { return a.time < b.time; };
  const auto first = entries_.begin() + static_cast<std::ptrdiff_t>(head_);
  const auto middle = entries_.begin() + static_cast<std::ptrdiff_t>(sorted_);
  // Stable, and the older (sorted) run first in the merge: equal times keep arrival order.
  std::stable_sort(middle, entries_.end(), by_time);
  std::inplace_merge(first, middle, entries_.end(), by_time);
  sorted_ = entries_.size();
}

std::size_t RecordBuffer::drop_through(std::int64_t time) {
  sort_new_entries();
  std::size_t dropped = 0;
  while (head_ < entries_.size() && entries_[head_].time <= time) {
    const std::uint64_t offset = entries_[head_].offset;
    const std::string_view body = body_at(offset);
    live_bytes_ -= static_cast<std::size_t>(body.data() + body.size() - (bytes_.data() + offset));
    ++head_;
    ++dropped;
  }
  if (dropped > 0) compact();
  return dropped;
}

// Frees dropped entries and bodies once they are most of what is held (amortised O(1) per
// dropped record), and gives memory back when the buffers have become much larger than what
// they hold.
void RecordBuffer::compact() {
  if (empty()) {
    if (bytes_.capacity() > 1024) {
      std::string().swap(bytes_);
      std::vector<Entry>().swap(entries_);
    } else {
      bytes_.clear();
      entries_.clear();
    }
    head_ = sorted_ = live_bytes_ = 0;
    return;
  }
  if (head_ * 2 >= entries_.size()) {
    entries_.erase(entries_.begin(), entries_.begin() + static_cast<std::ptrdiff_t>(head_));
    sorted_ -= head_;
    head_ = 0;
    if (entries_.capacity() > 256 && entries_.size() * 4 < entries_.capacity())
      entries_.shrink_to_fit();
  }
  if (live_bytes_ * 2 >= bytes_.size()) return;
  std::string live;
  live.reserve(live_bytes_ + live_bytes_ / 2);
  for (std::size_t k = head_; k < entries_.size(); ++k) {
    const std::uint64_t offset = entries_[k].offset;
    const std::string_view body = body_at(offset);
    entries_[k].offset = live.size();
    const char* from = bytes_.data() + offset;
    live.append(from, static_cast<std::size_t>(body.data() + body.size() - from));
  }
  bytes_.swap(live);
}

state::Record decode_stored_record(std::string_view body, std::int64_t timestamp,
                                   state::Arena& arena) {
  Reader reader(body, arena);
  auto n = static_cast<std::uint32_t>(reader.varint());
  state::Record record;
  record.fields = reader.fields(n);
  record.size = n;
  record.timestamp = timestamp;
  STREAMCTL_STATE_ASSERT(reader.position() == body.data() + body.size(),
                         "corrupt join buffer: a body of the wrong length");
  return record;
}

} // namespace streamctl::operators
