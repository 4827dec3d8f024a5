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
  const std::size_t start = bytes_.size();
  put_raw(bytes_, time);
  put_raw(bytes_, std::uint32_t{0}); // the body's length, patched below
  put_varint(bytes_, record.size);
  for (const auto& field : record) {
    put_varint(bytes_, field.name);
    put_value(bytes_, field.value);
  }
  const std::size_t body = bytes_.size() - start - 12;
  STREAMCTL_STATE_ASSERT(body <= UINT32_MAX, "a record of more than 4 GiB in a join");
  auto n = static_cast<std::uint32_t>(body);
  std::memcpy(bytes_.data() + start + 8, &n, 4);
  put_raw(bytes_, n);
  ++count_;

  // Usually records come in time order and the entry stays last. Otherwise walk back to the
  // first entry of a greater time and rotate the new entry in front of it.
  std::size_t at = start;
  while (at > head_) {
    std::uint32_t prev_n = read_u32(at - 4);
    std::size_t prev = at - entry_overhead - prev_n;
    if (read_i64(prev) <= time) break;
    at = prev;
  }
  if (at != start)
    std::rotate(bytes_.begin() + static_cast<std::ptrdiff_t>(at),
                bytes_.begin() + static_cast<std::ptrdiff_t>(start), bytes_.end());
}

std::size_t RecordBuffer::drop_through(std::int64_t time) {
  std::size_t dropped = 0;
  while (head_ < bytes_.size() && read_i64(head_) <= time) {
    head_ += entry_overhead + read_u32(head_ + 8);
    ++dropped;
  }
  count_ -= dropped;
  if (dropped > 0) compact();
  return dropped;
}

// Frees dropped bytes once they are most of the string (amortised O(1) per dropped record),
// and gives memory back when the string has become much larger than what it holds.
void RecordBuffer::compact() {
  if (head_ == bytes_.size()) {
    if (bytes_.capacity() > 1024)
      std::string().swap(bytes_);
    else
      bytes_.clear();
    head_ = 0;
    return;
  }
  if (head_ * 2 < bytes_.size()) return;
  bytes_.erase(0, head_);
  head_ = 0;
  if (bytes_.capacity() > 1024 && bytes_.size() * 4 < bytes_.capacity()) bytes_.shrink_to_fit();
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
