#include "state/batch_codec.hpp"

#include <bit>
#include <cstring>
#include <limits>

namespace streamctl::state {

namespace {

std::uint64_t zigzag(std::int64_t n) {
  return (static_cast<std::uint64_t>(n) << 1) ^ static_cast<std::uint64_t>(n >> 63);
}

std::int64_t unzigzag(std::uint64_t v) {
  return static_cast<std::int64_t>(v >> 1) ^ -static_cast<std::int64_t>(v & 1);
}

std::uint64_t to_little_endian(std::uint64_t v) {
  if constexpr (std::endian::native == std::endian::big) return __builtin_bswap64(v);
  return v;
}

char* put_varint(char* p, std::uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<char>(v);
  return p;
}

char* put_bytes(char* p, std::string_view s) {
  p = put_varint(p, s.size());
  if (!s.empty()) std::memcpy(p, s.data(), s.size());
  return p + s.size();
}

char* put_container(char* p, const Value& v, const std::uint32_t* index_plus_one);

// Writes tag and payload; `index_plus_one` maps FieldId to name index + 1. Scalars inline,
// containers out of line.
inline char* put_value(char* p, const Value& v, const std::uint32_t* index_plus_one) {
  *p++ = static_cast<char>(v.kind);
  switch (v.kind) {
  case Kind::Null: return p;
  case Kind::Bool: *p++ = v.b ? 1 : 0; return p;
  case Kind::Int: return put_varint(p, zigzag(v.i));
  case Kind::Float: {
    std::uint64_t bits;
    std::memcpy(&bits, &v.f, 8);
    bits = to_little_endian(bits);
    std::memcpy(p, &bits, 8);
    return p + 8;
  }
  case Kind::String: return put_bytes(p, v.str());
  default: return put_container(p, v, index_plus_one);
  }
}

[[gnu::noinline]] char* put_container(char* p, const Value& v,
                                      const std::uint32_t* index_plus_one) {
  p = put_varint(p, v.size);
  if (v.kind == Kind::Array) {
    for (std::uint32_t k = 0; k < v.size; ++k) p = put_value(p, v.array[k], index_plus_one);
  } else {
    for (std::uint32_t k = 0; k < v.size; ++k) {
      p = put_varint(p, index_plus_one[v.map[k].name] - 1);
      p = put_value(p, v.map[k].value, index_plus_one);
    }
  }
  return p;
}

constexpr std::size_t max_varint = 10;

// Reads one batch. Every read is checked against end_; `pending_` is the least number of bytes
// that the containers being decoded still need (one per array element, two per map member or
// field, one per record), so a count is accepted only if its elements fit in what remains
// after them. That bounds the values allocated to one per input byte, whatever the nesting.
// Error paths are out of line so that the loop over scalar fields stays small.
class Decoder {
public:
  Decoder(std::string_view bytes, FieldNames& names)
      : begin_(reinterpret_cast<const unsigned char*>(bytes.data())), p_(begin_),
        end_(begin_ + bytes.size()), names_(names) {}

  bool decode(Batch& batch);
  const std::string& error() const { return error_; }

private:
  // Bytes not reserved by open containers. A long varint may eat into the reserve of a
  // corrupt input, hence the saturation.
  std::size_t available() const {
    auto remaining = static_cast<std::size_t>(end_ - p_);
    return remaining > pending_ ? remaining - pending_ : 0;
  }

  bool corrupt(const char* what) { return corrupt_at(p_, what); }
  [[gnu::cold, gnu::noinline]] bool corrupt_at(const unsigned char* at, std::string_view what) {
    error_ = "corrupt batch at byte " + std::to_string(at - begin_) + ": ";
    error_ += what;
    return false;
  }
  [[gnu::cold, gnu::noinline]] bool too_many(const unsigned char* at, const char* what,
                                             std::uint64_t n) {
    return corrupt_at(at, std::string(what) + " " + std::to_string(n) +
                              " exceeds the remaining bytes");
  }

  bool varint(std::uint64_t& v) {
    if (p_ < end_ && *p_ < 0x80) [[likely]] {
      v = *p_++;
      return true;
    }
    return varint_slow(v);
  }

  [[gnu::noinline]] bool varint_slow(std::uint64_t& v) {
    const unsigned char* start = p_;
    std::uint64_t result = 0;
    for (unsigned shift = 0; p_ < end_; shift += 7) {
      unsigned char b = *p_++;
      if (shift == 63 && b > 1) return corrupt_at(start, "varint overflows 64 bits");
      result |= static_cast<std::uint64_t>(b & 0x7F) << shift;
      if (b < 0x80) {
        v = result;
        return true;
      }
      if (shift == 63) return corrupt_at(start, "varint longer than 10 bytes");
    }
    return corrupt_at(start, "truncated varint");
  }

  // A count of items needing at least `min_bytes` each, checked against what remains.
  bool count(std::uint64_t& n, std::size_t min_bytes, const char* what) {
    const unsigned char* at = p_;
    if (!varint(n)) return false;
    if (n > available() / min_bytes) [[unlikely]]
      return too_many(at, what, n);
    return true;
  }

  bool name_index(FieldId& id) {
    const unsigned char* at = p_;
    std::uint64_t index = 0;
    if (!varint(index)) return false;
    if (index >= ids_.size()) [[unlikely]]
      return bad_index(at, index);
    id = ids_[index];
    return true;
  }

  [[gnu::cold, gnu::noinline]] bool bad_index(const unsigned char* at, std::uint64_t index) {
    return corrupt_at(at, "name index " + std::to_string(index) + " out of range (" +
                              std::to_string(ids_.size()) + " names)");
  }

  bool value(Value& out, int depth);
  [[gnu::noinline]] bool container(Value& out, unsigned char tag, const unsigned char* at,
                                   int depth);
  bool fields(Field* out, std::uint64_t n, int depth);

  const unsigned char* begin_;
  const unsigned char* p_;
  const unsigned char* end_;
  FieldNames& names_;
  Arena* arena_ = nullptr;
  std::size_t pending_ = 0;
  std::vector<FieldId> ids_;
  std::string error_;
};

bool Decoder::fields(Field* out, std::uint64_t n, int depth) {
  for (std::uint64_t k = 0; k < n; ++k) {
    pending_ -= 2; // this field's share, about to be read
    if (!name_index(out[k].name)) return false;
    if (!value(out[k].value, depth)) return false;
  }
  return true;
}

inline bool Decoder::value(Value& out, int depth) {
  if (p_ >= end_) [[unlikely]]
    return corrupt("truncated value");
  const unsigned char* at = p_;
  unsigned char tag = *p_++;
  switch (static_cast<Kind>(tag)) {
  case Kind::Null: out = Value::null(); return true;
  case Kind::Bool:
    if (p_ >= end_) return corrupt("truncated bool");
    if (*p_ > 1) return corrupt("bool byte is neither 0 nor 1");
    out = Value::boolean(*p_++ != 0);
    return true;
  case Kind::Int: {
    std::uint64_t v = 0;
    if (!varint(v)) return false;
    out = Value::integer(unzigzag(v));
    return true;
  }
  case Kind::Float: {
    if (end_ - p_ < 8) return corrupt("truncated float");
    std::uint64_t bits;
    std::memcpy(&bits, p_, 8);
    bits = to_little_endian(bits);
    double d;
    std::memcpy(&d, &bits, 8);
    p_ += 8;
    out = Value::floating(d);
    return true;
  }
  case Kind::String: {
    std::uint64_t n = 0;
    if (!count(n, 1, "string length")) return false;
    if (n > std::numeric_limits<std::uint32_t>::max()) return corrupt_at(at, "string too long");
    out = Value::string(std::string_view(reinterpret_cast<const char*>(p_), n));
    p_ += n;
    return true;
  }
  default: return container(out, tag, at, depth);
  }
}

bool Decoder::container(Value& out, unsigned char tag, const unsigned char* at, int depth) {
  switch (static_cast<Kind>(tag)) {
  case Kind::Array: {
    if (depth >= batch_codec_max_depth) return corrupt_at(at, "nesting too deep");
    std::uint64_t n = 0;
    if (!count(n, 1, "array size")) return false;
    Value* elements = n == 0 ? nullptr : arena_->allocate_array<Value>(n);
    pending_ += n;
    for (std::uint64_t k = 0; k < n; ++k) {
      pending_ -= 1;
      if (!value(elements[k], depth + 1)) return false;
    }
    out = Value::array_of(elements, static_cast<std::uint32_t>(n));
    return true;
  }
  case Kind::Map: {
    if (depth >= batch_codec_max_depth) return corrupt_at(at, "nesting too deep");
    std::uint64_t n = 0;
    if (!count(n, 2, "map size")) return false;
    Field* members = n == 0 ? nullptr : arena_->allocate_array<Field>(n);
    pending_ += 2 * n;
    if (!fields(members, n, depth + 1)) return false;
    out = Value::map_of(members, static_cast<std::uint32_t>(n));
    return true;
  }
  default: return corrupt_at(at, "unknown kind tag " + std::to_string(tag));
  }
}

bool Decoder::decode(Batch& batch) {
  arena_ = &batch.arena();
  if (end_ - p_ < 5)
    return corrupt_at(end_, "truncated header (" + std::to_string(end_ - p_) + " bytes)");
  if (std::memcmp(p_, batch_codec_magic, 4) != 0)
    return corrupt("not a streamctl batch (bad magic)");
  if (p_[4] != batch_codec_version)
    return corrupt_at(p_ + 4, "unsupported version " + std::to_string(p_[4]) +
                                  " (this build reads version " +
                                  std::to_string(batch_codec_version) + ")");
  p_ += 5;

  std::uint64_t name_count = 0;
  if (!count(name_count, 1, "name count")) return false;
  ids_.resize(name_count);
  for (std::uint64_t k = 0; k < name_count; ++k) {
    std::uint64_t n = 0;
    if (!count(n, 1, "name length")) return false;
    ids_[k] = names_.intern(std::string_view(reinterpret_cast<const char*>(p_), n));
    p_ += n;
  }

  std::uint64_t record_count = 0;
  if (!count(record_count, 1, "record count")) return false;
  for (std::uint64_t r = 0; r < record_count; ++r) {
    pending_ = record_count - r - 1; // one byte for each record after this one
    std::uint64_t n = 0;
    if (!count(n, 2, "field count")) return false;
    Field* fs = n == 0 ? nullptr : arena_->allocate_array<Field>(n);
    pending_ += 2 * n;
    if (!fields(fs, n, 0)) return false;
    batch.add_shared(Record{fs, static_cast<std::uint32_t>(n)});
  }
  if (p_ != end_ && *p_ == 'T') {
    ++p_;
    std::uint64_t previous = 0;
    for (std::size_t r = 0; r < batch.size(); ++r) {
      std::uint64_t zigzag = 0;
      if (!varint(zigzag)) return false;
      previous += static_cast<std::uint64_t>(unzigzag(zigzag));
      batch.set_timestamp(r, static_cast<std::int64_t>(previous));
    }
  }
  if (p_ != end_) return corrupt("trailing bytes after the last record");
  return true;
}

} // namespace

inline void BatchEncoder::index_of(FieldId id) {
  if (id >= index_plus_one_.size()) [[unlikely]]
    index_plus_one_.resize(static_cast<std::size_t>(id) + 1, 0);
  std::uint32_t& slot = index_plus_one_[id];
  if (slot == 0) {
    used_.push_back(id);
    slot = static_cast<std::uint32_t>(used_.size());
  }
}

// Registers the names a value uses and returns a bound of its encoded size (tag included).
inline std::size_t BatchEncoder::collect(const Value& v) {
  switch (v.kind) {
  case Kind::Null: return 1;
  case Kind::Bool: return 2;
  case Kind::Int: return 1 + max_varint;
  case Kind::Float: return 9;
  case Kind::String: return 1 + max_varint + v.size;
  default: return collect_container(v);
  }
}

std::size_t BatchEncoder::collect_container(const Value& v) {
  std::size_t n = 1 + max_varint;
  if (v.kind == Kind::Array) {
    for (std::uint32_t k = 0; k < v.size; ++k) n += collect(v.array[k]);
  } else {
    for (std::uint32_t k = 0; k < v.size; ++k) {
      index_of(v.map[k].name);
      n += max_varint + collect(v.map[k].value);
    }
  }
  return n;
}

std::size_t BatchEncoder::bound(const Batch& batch, const FieldNames& names,
                                const std::vector<bool>* keep) {
  keep_ = keep;
  auto kept = [keep](FieldId id) { return keep == nullptr || (id < keep->size() && (*keep)[id]); };
  for (FieldId id : used_) index_plus_one_[id] = 0; // a bound() that no write() followed
  used_.clear();
  std::size_t bound = 5 + 2 * max_varint;
  bool any_timestamp = false;
  for (const Record& r : batch) {
    bound += max_varint;
    any_timestamp = any_timestamp || r.timestamp != kNoTimestamp;
    for (const Field& f : r) {
      if (!kept(f.name)) continue;
      index_of(f.name);
      bound += max_varint + collect(f.value);
    }
  }
  for (FieldId id : used_) bound += max_varint + names.name(id).size();
  timestamps_ = any_timestamp;
  if (any_timestamp) bound += 1 + batch.size() * max_varint;
  return bound;
}

std::size_t BatchEncoder::write(const Batch& batch, const FieldNames& names, char* out) {
  const std::vector<bool>* keep = keep_;
  auto kept = [keep](FieldId id) { return keep == nullptr || (id < keep->size() && (*keep)[id]); };
  char* p = out;
  std::memcpy(p, batch_codec_magic, 4);
  p[4] = static_cast<char>(batch_codec_version);
  p += 5;
  p = put_varint(p, used_.size());
  for (FieldId id : used_) p = put_bytes(p, names.name(id));
  p = put_varint(p, batch.size());
  const std::uint32_t* index = index_plus_one_.data();
  for (const Record& r : batch) {
    std::uint32_t count = r.size;
    if (keep != nullptr) {
      count = 0;
      for (const Field& f : r) count += kept(f.name) ? 1 : 0;
    }
    p = put_varint(p, count);
    for (const Field& f : r) {
      if (keep != nullptr && !kept(f.name)) continue;
      std::uint32_t i = index[f.name] - 1;
      if (i < 0x80)
        *p++ = static_cast<char>(i);
      else
        p = put_varint(p, i);
      p = put_value(p, f.value, index);
    }
  }
  for (FieldId id : used_) index_plus_one_[id] = 0;
  used_.clear();
  if (timestamps_) p = put_timestamps(batch, p);
  return static_cast<std::size_t>(p - out);
}

void BatchEncoder::encode(const Batch& batch, const FieldNames& names, std::string& out,
                          const std::vector<bool>* keep) {
  // Pass 1: the name table and a bound of the size, so that pass 2 writes through a pointer.
  std::size_t start = out.size();
  out.resize(start + bound(batch, names, keep));
  out.resize(start + write(batch, names, out.data() + start));
}

char* BatchEncoder::put_timestamps(const Batch& batch, char* p) {
  *p++ = 'T';
  std::uint64_t previous = 0;
  for (const Record& r : batch) {
    p = put_varint(p, zigzag(static_cast<std::int64_t>(static_cast<std::uint64_t>(r.timestamp) - previous)));
    previous = static_cast<std::uint64_t>(r.timestamp);
  }
  return p;
}

void encode_batch(const Batch& batch, const FieldNames& names, std::string& out,
                  const std::vector<bool>* keep) {
  thread_local BatchEncoder encoder;
  encoder.encode(batch, names, out, keep);
}

Result<Batch> decode_batch(std::string_view bytes, std::shared_ptr<const void> owner,
                           FieldNames& names) {
  Batch batch;
  Decoder decoder(bytes, names);
  if (!decoder.decode(batch)) return fail(decoder.error());
  if (owner) batch.retain(std::move(owner));
  return batch;
}

} // namespace streamctl::state
