#include "state/key_codec.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>

#include "state/key_group.hpp"
#include "state/short_copy.hpp"

namespace streamctl::state {

namespace {

// Tags of the format (key_codec.hpp). Fixed here, not taken from Kind, so that a change of the
// enum cannot silently change stored keys.
enum Tag : std::uint8_t {
  tag_null = 0,
  tag_bool = 1,
  tag_int = 2,
  tag_float = 3,
  tag_string = 4,
  tag_array = 5,
  tag_map = 6,
};

constexpr std::uint64_t canonical_nan_bits = 0x7FF8000000000000ULL;

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

// True (and the integer in *out) when the float `f` is written as an int: finite, integral and
// in [-2^63, 2^63). -0.0 gives 0.
bool float_as_int(double f, std::int64_t* out) {
  if (!(f >= -0x1p63 && f < 0x1p63)) return false; // also rejects NaN and infinities
  if (std::trunc(f) != f) return false;
  *out = static_cast<std::int64_t>(f);
  return true;
}

class Encoder {
public:
  Encoder(const FieldNames& names, std::string& out) : names_(names), out_(out) {}

  void varint(std::uint64_t v) {
    char buf[10];
    std::size_t n = 0;
    while (v >= 0x80) {
      buf[n++] = static_cast<char>(v | 0x80);
      v >>= 7;
    }
    buf[n++] = static_cast<char>(v);
    out_.append(buf, n);
  }

  void bytes(std::string_view s) {
    varint(s.size());
    out_.append(s.data(), s.size());
  }

  void tag(Tag t) { out_.push_back(static_cast<char>(t)); }

  void value(const Value& v, int depth) {
    switch (v.kind) {
    case Kind::Null: tag(tag_null); return;
    case Kind::Bool:
      tag(tag_bool);
      out_.push_back(v.b ? 1 : 0);
      return;
    case Kind::Int:
      tag(tag_int);
      varint(zigzag(v.i));
      return;
    case Kind::Float: {
      std::int64_t as_int = 0;
      if (float_as_int(v.f, &as_int)) {
        tag(tag_int);
        varint(zigzag(as_int));
        return;
      }
      std::uint64_t bits = canonical_nan_bits;
      if (!std::isnan(v.f)) std::memcpy(&bits, &v.f, 8);
      bits = to_little_endian(bits);
      tag(tag_float);
      out_.append(reinterpret_cast<const char*>(&bits), 8);
      return;
    }
    case Kind::String:
      tag(tag_string);
      bytes(v.str());
      return;
    case Kind::Array:
      STREAMCTL_STATE_ASSERT(depth < key_codec_max_depth, "key value nested too deeply");
      tag(tag_array);
      varint(v.size);
      for (std::uint32_t k = 0; k < v.size; ++k)
        value(v.array[k], depth + 1);
      return;
    case Kind::Map: map(v, depth); return;
    }
    STREAMCTL_STATE_ASSERT(false, "value of unknown kind");
  }

private:
  void map(const Value& v, int depth) {
    STREAMCTL_STATE_ASSERT(depth < key_codec_max_depth, "key value nested too deeply");
    tag(tag_map);
    varint(v.size);
    // Members in ascending order of name bytes, equal names in their order (stable).
    std::array<std::uint32_t, 16> small;
    std::vector<std::uint32_t> large;
    std::uint32_t* order = small.data();
    if (v.size > small.size()) {
      large.resize(v.size);
      order = large.data();
    }
    for (std::uint32_t k = 0; k < v.size; ++k)
      order[k] = k;
    std::stable_sort(order, order + v.size, [&](std::uint32_t a, std::uint32_t b) {
      return names_.name(v.map[a].name) < names_.name(v.map[b].name);
    });
    for (std::uint32_t k = 0; k < v.size; ++k) {
      const Field& f = v.map[order[k]];
      bytes(names_.name(f.name));
      value(f.value, depth + 1);
    }
  }

  const FieldNames& names_;
  std::string& out_;
};

// Reads one key. Every read is checked against end_. `pending_` is the least number of bytes
// the containers being decoded still need for their elements not yet started (1 per value, 2
// per map member), so a count is accepted only if its elements fit in what remains after them:
// the values allocated are at most one per input byte, whatever the nesting.
class Decoder {
public:
  Decoder(std::string_view bytes, FieldNames& names, Arena& arena)
      : p_(reinterpret_cast<const std::uint8_t*>(bytes.data())), end_(p_ + bytes.size()),
        names_(names), arena_(arena) {}

  Result<std::vector<Value>> key() {
    std::vector<Value> values;
    if (auto ok = key_into(values); !ok) return fail(ok.error());
    return values;
  }

  // key() into `values`, whose capacity is reused.
  Result<void> key_into(std::vector<Value>& values) {
    std::uint64_t count = 0;
    if (!count_of(1, &count)) return fail(error_);
    values.assign(count, Value());
    for (auto& v : values) {
      pending_ -= 1;
      if (!value(0, &v)) return fail(error_);
    }
    if (p_ != end_) return fail("key: " + std::to_string(end_ - p_) + " bytes after the key");
    return {};
  }

private:
  bool bad(const char* what) {
    error_ = std::string("key: ") + what;
    return false;
  }

  std::size_t remaining() const { return static_cast<std::size_t>(end_ - p_); }

  bool varint(std::uint64_t* out) {
    std::uint64_t v = 0;
    for (int shift = 0, n = 0;; shift += 7, ++n) {
      if (p_ == end_) return bad("truncated varint");
      std::uint8_t b = *p_++;
      if (n == 9 && b > 1) return bad("varint overflows 64 bits");
      v |= static_cast<std::uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) {
        if (b == 0 && n > 0) return bad("varint not in its shortest form");
        *out = v;
        return true;
      }
    }
  }

  // Reads an element count whose elements need at least `min_bytes` each, and reserves them.
  bool count_of(std::size_t min_bytes, std::uint64_t* count) {
    if (!varint(count)) return false;
    std::size_t available = remaining() - std::min(remaining(), pending_);
    if (*count > available / min_bytes) return bad("count larger than the bytes that follow");
    pending_ += *count * min_bytes;
    return true;
  }

  bool value(int depth, Value* out) {
    if (p_ == end_) return bad("truncated value");
    std::uint8_t tag = *p_++;
    switch (tag) {
    case tag_null: *out = Value::null(); return true;
    case tag_bool:
      if (p_ == end_) return bad("truncated bool");
      if (*p_ > 1) return bad("bool byte other than 0 or 1");
      *out = Value::boolean(*p_++ == 1);
      return true;
    case tag_int: {
      std::uint64_t z = 0;
      if (!varint(&z)) return false;
      *out = Value::integer(unzigzag(z));
      return true;
    }
    case tag_float: {
      if (remaining() < 8) return bad("truncated float");
      std::uint64_t bits = 0;
      std::memcpy(&bits, p_, 8);
      p_ += 8;
      bits = to_little_endian(bits);
      double f = 0;
      std::memcpy(&f, &bits, 8);
      std::int64_t as_int = 0;
      if (float_as_int(f, &as_int)) return bad("integral float (written as an int)");
      if (std::isnan(f) && bits != canonical_nan_bits) return bad("NaN not in canonical form");
      *out = Value::floating(f);
      return true;
    }
    case tag_string: {
      std::string_view s;
      if (!bytes(&s)) return false;
      *out = Value::string(arena_.copy(s));
      return true;
    }
    case tag_array: {
      if (depth >= key_codec_max_depth) return bad("nested too deeply");
      std::uint64_t n = 0;
      if (!count_of(1, &n)) return false;
      Value* elements = arena_.allocate_array<Value>(n);
      for (std::uint64_t k = 0; k < n; ++k) {
        pending_ -= 1;
        new (&elements[k]) Value();
        if (!value(depth + 1, &elements[k])) return false;
      }
      *out = Value::array_of(elements, static_cast<std::uint32_t>(n));
      return true;
    }
    case tag_map: {
      if (depth >= key_codec_max_depth) return bad("nested too deeply");
      std::uint64_t n = 0;
      if (!count_of(2, &n)) return false;
      Field* fields = arena_.allocate_array<Field>(n);
      std::string_view previous;
      for (std::uint64_t k = 0; k < n; ++k) {
        pending_ -= 2;
        std::string_view name;
        if (!bytes(&name)) return false;
        if (k > 0 && name < previous) return bad("map members not in order of name");
        previous = name;
        new (&fields[k]) Field{names_.intern(name), Value()};
        if (!value(depth + 1, &fields[k].value)) return false;
      }
      *out = Value::map_of(fields, static_cast<std::uint32_t>(n));
      return true;
    }
    default: return bad("unknown value tag");
    }
  }

  bool bytes(std::string_view* out) {
    std::uint64_t n = 0;
    if (!varint(&n)) return false;
    std::size_t available = remaining() - std::min(remaining(), pending_);
    if (n > available) return bad("string longer than the bytes that follow");
    *out = std::string_view(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return true;
  }

  const std::uint8_t* p_;
  const std::uint8_t* end_;
  FieldNames& names_;
  Arena& arena_;
  std::size_t pending_ = 0;
  std::string error_;
};

} // namespace

namespace {

char* put_varint(char* p, std::uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<char>(v);
  return p;
}

// Writes a null, bool, int, float or string value (the same bytes as Encoder::value).
char* put_scalar(char* p, const Value& v) {
  switch (v.kind) {
  case Kind::Null: *p++ = static_cast<char>(tag_null); return p;
  case Kind::Bool:
    *p++ = static_cast<char>(tag_bool);
    *p++ = v.b ? 1 : 0;
    return p;
  case Kind::Int: *p++ = static_cast<char>(tag_int); return put_varint(p, zigzag(v.i));
  case Kind::Float: {
    std::int64_t as_int = 0;
    if (float_as_int(v.f, &as_int)) {
      *p++ = static_cast<char>(tag_int);
      return put_varint(p, zigzag(as_int));
    }
    std::uint64_t bits = canonical_nan_bits;
    if (!std::isnan(v.f)) std::memcpy(&bits, &v.f, 8);
    bits = to_little_endian(bits);
    *p++ = static_cast<char>(tag_float);
    std::memcpy(p, &bits, 8);
    return p + 8;
  }
  case Kind::String:
    *p++ = static_cast<char>(tag_string);
    p = put_varint(p, v.size);
    copy_short(p, v.s, v.size);
    return p + v.size;
  default: return p; // containers take the general path
  }
}

} // namespace

void encode_key(std::span<const Value> key, const FieldNames& names, std::string& out) {
  out.clear();
  append_key(key, names, out);
}

namespace {

// Keys of scalars (nearly all keys) are written in place: room for an upper bound, then plain
// stores, which is several times faster than appending piece by piece and matters on the hot
// path of every keyed operator and key-partitioned edge. The bound, or 0 when the key holds an
// array or a map (the general encoder's).
std::size_t flat_key_bound(std::span<const Value> key) {
  std::size_t bound = 10; // value count
  for (const Value& v : key) {
    if (v.kind == Kind::Array || v.kind == Kind::Map) return 0;
    bound += 1 + 10 + (v.kind == Kind::String ? v.size : 0); // tag, varint or 8 bytes, bytes
  }
  return bound;
}

char* put_flat_key(std::span<const Value> key, char* p) {
  p = put_varint(p, key.size());
  for (const Value& v : key)
    p = put_scalar(p, v);
  return p;
}

void append_general_key(std::span<const Value> key, const FieldNames& names, std::string& out) {
  Encoder e(names, out);
  e.varint(key.size());
  for (const Value& v : key)
    e.value(v, 0);
}

} // namespace

void append_key(std::span<const Value> key, const FieldNames& names, std::string& out) {
  if (const std::size_t bound = flat_key_bound(key); bound != 0) {
    const std::size_t at = out.size();
    out.resize(at + bound);
    char* p = put_flat_key(key, out.data() + at);
    out.resize(static_cast<std::size_t>(p - out.data()));
    return;
  }
  append_general_key(key, names, out);
}

void append_key(std::span<const Value> key, const FieldNames& names, ByteScratch& out) {
  if (const std::size_t bound = flat_key_bound(key); bound != 0) {
    char* p = put_flat_key(key, out.grow(bound));
    out.truncate(static_cast<std::size_t>(p - out.data()));
    return;
  }
  thread_local std::string general;
  general.clear();
  append_general_key(key, names, general);
  std::memcpy(out.grow(general.size()), general.data(), general.size());
}

void append_key(const Value& only, const FieldNames& names, ByteScratch& out) {
  const std::span<const Value> key(&only, 1);
  const std::size_t bound = flat_key_bound(key);
  if (bound == 0) return append_key(key, names, out); // an array or a map
  char* p = out.grow(bound);
  *p++ = 1; // the value count, as put_flat_key writes it
  p = put_scalar(p, only);
  out.truncate(static_cast<std::size_t>(p - out.data()));
}

Result<std::vector<Value>> decode_key(std::string_view bytes, FieldNames& names, Arena& arena) {
  return Decoder(bytes, names, arena).key();
}

Result<void> decode_key_into(std::string_view bytes, FieldNames& names, Arena& arena,
                             std::vector<Value>& values) {
  return Decoder(bytes, names, arena).key_into(values);
}

} // namespace streamctl::state
