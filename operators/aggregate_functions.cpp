#include "operators/aggregate_functions.hpp"

#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <new>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "operators/hyperloglog.hpp"
#include "state/le_bytes.hpp"

namespace streamctl::operators {

using state::Kind;
using state::Value;

const char* aggregate_kind_name(AggregateKind kind) {
  switch (kind) {
  case AggregateKind::Count: return "count";
  case AggregateKind::Sum: return "sum";
  case AggregateKind::Avg: return "avg";
  case AggregateKind::Min: return "min";
  case AggregateKind::Max: return "max";
  case AggregateKind::First: return "first";
  case AggregateKind::Last: return "last";
  case AggregateKind::CountDistinct: return "count_distinct";
  case AggregateKind::ApproxCountDistinct: return "approx_count_distinct";
  case AggregateKind::TopK: return "top_k";
  }
  return "?";
}

bool AggregateFunction::evaluate(const state::Record& r, pipeline::EvalContext& ctx,
                                 Value& arg) const {
  if (!argument_) {
    arg = Value::null();
    return true;
  }
  if (argument_->eval(r, ctx, arg)) return true;
  ctx.error = text_ + ": " + ctx.error;
  return false;
}

bool AggregateFunction::add(std::byte* slot, const state::Record& r,
                            pipeline::EvalContext& ctx) const {
  Value arg;
  if (!evaluate(r, ctx, arg) || !check(slot, arg, ctx.error)) return false;
  apply(slot, arg);
  return true;
}

namespace {

// Values nested deeper than this are a per-record error (the batch codec reads up to 256).
constexpr int max_depth = 256;

template <typename T> T& slot_as(std::byte* p) {
  return *std::launder(reinterpret_cast<T*>(p));
}
template <typename T> const T& slot_as(const std::byte* p) {
  return *std::launder(reinterpret_cast<const T*>(p));
}

// ---- little-endian fixed-width bytes ----

void put_u8(std::string& out, std::uint8_t v) {
  out.push_back(static_cast<char>(v));
}
void put_u32(std::string& out, std::uint32_t v) {
  state::append_le(out, v);
}
void put_u64(std::string& out, std::uint64_t v) {
  state::append_le(out, v);
}
void put_i64(std::string& out, std::int64_t v) {
  put_u64(out, static_cast<std::uint64_t>(v));
}
void put_f64(std::string& out, double v) {
  std::uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  put_u64(out, bits);
}
void put_bytes(std::string& out, std::string_view bytes) {
  put_u32(out, static_cast<std::uint32_t>(bytes.size()));
  out.append(bytes);
}

// Reads from the front of a view, consuming what it reads; every read checks the length.
struct Reader {
  std::string_view& in;

  bool u8(std::uint8_t& v) {
    if (in.empty()) return false;
    v = static_cast<std::uint8_t>(in[0]);
    in.remove_prefix(1);
    return true;
  }
  bool u32(std::uint32_t& v) {
    if (in.size() < 4) return false;
    v = 0;
    for (int k = 0; k < 4; ++k)
      v |= static_cast<std::uint32_t>(static_cast<unsigned char>(in[k])) << (8 * k);
    in.remove_prefix(4);
    return true;
  }
  bool u64(std::uint64_t& v) {
    if (in.size() < 8) return false;
    v = 0;
    for (int k = 0; k < 8; ++k)
      v |= static_cast<std::uint64_t>(static_cast<unsigned char>(in[k])) << (8 * k);
    in.remove_prefix(8);
    return true;
  }
  bool i64(std::int64_t& v) {
    std::uint64_t u;
    if (!u64(u)) return false;
    v = static_cast<std::int64_t>(u);
    return true;
  }
  bool f64(double& v) {
    std::uint64_t bits;
    if (!u64(bits)) return false;
    std::memcpy(&v, &bits, sizeof v);
    return true;
  }
  bool bytes(std::string_view& v) {
    std::uint32_t n;
    if (!u32(n) || in.size() < n) return false;
    v = in.substr(0, n);
    in.remove_prefix(n);
    return true;
  }
};

Failure truncated(AggregateKind kind) {
  return fail(std::string(aggregate_kind_name(kind)) + " state truncated or corrupt");
}

// ---- numbers ----

bool is_nan(const Value& v) {
  return v.kind == Kind::Float && std::isnan(v.f);
}

// Three-way comparison of two numbers without rounding large ints; 2 when either is NaN.
int compare_int_float(std::int64_t a, double b) {
  if (std::isnan(b)) return 2;
  if (b >= 9223372036854775808.0) return -1;
  if (b < -9223372036854775808.0) return 1;
  double whole = std::trunc(b);
  auto t = static_cast<std::int64_t>(whole);
  if (a != t) return a < t ? -1 : 1;
  double fraction = b - whole;
  return fraction > 0 ? -1 : fraction < 0 ? 1 : 0;
}

int compare_numbers(const Value& a, const Value& b) {
  if (a.kind == Kind::Int && b.kind == Kind::Int) return a.i < b.i ? -1 : a.i > b.i ? 1 : 0;
  if (a.kind == Kind::Int) return compare_int_float(a.i, b.f);
  if (b.kind == Kind::Int) {
    int c = compare_int_float(b.i, a.f);
    return c == 2 ? 2 : -c;
  }
  if (std::isnan(a.f) || std::isnan(b.f)) return 2;
  return a.f < b.f ? -1 : a.f > b.f ? 1 : 0;
}

bool float_as_int(double d, std::int64_t& out) {
  if (!std::isfinite(d) || d != std::trunc(d)) return false;
  if (d < -9223372036854775808.0 || d >= 9223372036854775808.0) return false;
  out = static_cast<std::int64_t>(d);
  return true;
}

// ---- value bytes ----
//
// One encoding serves two uses. Multi-byte numbers are little-endian.
//   null   'n'
//   bool   'b' u8 (0 | 1)
//   int    'i' i64
//   float  'f' f64 (IEEE 754 binary64 bits)
//   string 's' u32 length, bytes
//   array  'a' u32 count, count values
//   map    'm' u32 count, count × (u32 name length, name bytes, value)
// Stored form (first/last of an array or map): the value as it is, fields in record order.
// Canonical form (count_distinct, approx_count_distinct, top_k keys): equal values (SPEC §4)
// give equal bytes: a float with an integral value that fits an int is written as that int
// ('i'), every NaN has the bits 0x7ff8000000000000, and a map's members are sorted by name
// bytes. Names are text, never FieldIds, so the bytes mean the same in every process.

// Checks that `v` nests at most max_depth levels (the only way encoding can fail).
bool depth_ok(const Value& v, int depth = 0) {
  if (depth > max_depth) return false;
  if (v.kind == Kind::Array) {
    for (std::uint32_t k = 0; k < v.size; ++k)
      if (!depth_ok(v.array[k], depth + 1)) return false;
  } else if (v.kind == Kind::Map) {
    for (std::uint32_t k = 0; k < v.size; ++k)
      if (!depth_ok(v.map[k].value, depth + 1)) return false;
  }
  return true;
}

void encode_value(const Value& v, const state::FieldNames& names, bool canonical,
                  std::string& out) {
  switch (v.kind) {
  case Kind::Null: put_u8(out, 'n'); return;
  case Kind::Bool:
    put_u8(out, 'b');
    put_u8(out, v.b ? 1 : 0);
    return;
  case Kind::Int:
    put_u8(out, 'i');
    put_i64(out, v.i);
    return;
  case Kind::Float: {
    std::int64_t as_int;
    if (canonical && float_as_int(v.f, as_int)) {
      put_u8(out, 'i');
      put_i64(out, as_int);
      return;
    }
    put_u8(out, 'f');
    if (canonical && std::isnan(v.f))
      put_u64(out, 0x7ff8000000000000ULL);
    else
      put_f64(out, v.f);
    return;
  }
  case Kind::String:
    put_u8(out, 's');
    put_bytes(out, v.str());
    return;
  case Kind::Array:
    put_u8(out, 'a');
    put_u32(out, v.size);
    for (std::uint32_t k = 0; k < v.size; ++k)
      encode_value(v.array[k], names, canonical, out);
    return;
  case Kind::Map: {
    put_u8(out, 'm');
    put_u32(out, v.size);
    std::vector<std::uint32_t> order(v.size);
    for (std::uint32_t k = 0; k < v.size; ++k)
      order[k] = k;
    if (canonical)
      std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
        return names.name(v.map[a].name) < names.name(v.map[b].name);
      });
    for (std::uint32_t k : order) {
      put_bytes(out, names.name(v.map[k].name));
      encode_value(v.map[k].value, names, canonical, out);
    }
    return;
  }
  }
}

// Checks one encoded value at the front of `in` and consumes it.
bool validate_value(std::string_view& in, int depth = 0) {
  if (depth > max_depth) return false;
  Reader r{in};
  std::uint8_t tag;
  if (!r.u8(tag)) return false;
  std::uint64_t u;
  std::uint32_t n;
  std::string_view bytes;
  switch (tag) {
  case 'n': return true;
  case 'b': {
    std::uint8_t b;
    return r.u8(b) && b <= 1;
  }
  case 'i':
  case 'f': return r.u64(u);
  case 's': return r.bytes(bytes);
  case 'a':
    if (!r.u32(n) || n > in.size()) return false; // every value takes a byte at least
    for (std::uint32_t k = 0; k < n; ++k)
      if (!validate_value(in, depth + 1)) return false;
    return true;
  case 'm':
    if (!r.u32(n) || n > in.size() / 5) return false; // name length + a value: 5 bytes at least
    for (std::uint32_t k = 0; k < n; ++k)
      if (!r.bytes(bytes) || !validate_value(in, depth + 1)) return false;
    return true;
  default: return false;
  }
}

// Decodes one (validated) encoded value into `out`, allocating in `arena`; map names are
// interned. Returns false on malformed bytes, leaving `out` unspecified.
bool decode_value(std::string_view& in, state::FieldNames& names, state::Arena& arena, Value& out,
                  int depth = 0) {
  if (depth > max_depth) return false;
  Reader r{in};
  std::uint8_t tag;
  if (!r.u8(tag)) return false;
  switch (tag) {
  case 'n': out = Value::null(); return true;
  case 'b': {
    std::uint8_t b;
    if (!r.u8(b)) return false;
    out = Value::boolean(b != 0);
    return true;
  }
  case 'i': {
    std::int64_t i;
    if (!r.i64(i)) return false;
    out = Value::integer(i);
    return true;
  }
  case 'f': {
    double f;
    if (!r.f64(f)) return false;
    out = Value::floating(f);
    return true;
  }
  case 's': {
    std::string_view s;
    if (!r.bytes(s)) return false;
    out = Value::string(arena.copy(s));
    return true;
  }
  case 'a': {
    std::uint32_t n;
    if (!r.u32(n) || n > in.size()) return false;
    Value* elements = arena.allocate_array<Value>(n);
    for (std::uint32_t k = 0; k < n; ++k) {
      new (&elements[k]) Value();
      if (!decode_value(in, names, arena, elements[k], depth + 1)) return false;
    }
    out = Value::array_of(elements, n);
    return true;
  }
  case 'm': {
    std::uint32_t n;
    if (!r.u32(n) || n > in.size() / 5) return false;
    state::Field* fields = arena.allocate_array<state::Field>(n);
    for (std::uint32_t k = 0; k < n; ++k) {
      std::string_view name;
      if (!r.bytes(name)) return false;
      new (&fields[k]) state::Field{names.intern(name), Value()};
      if (!decode_value(in, names, arena, fields[k].value, depth + 1)) return false;
    }
    out = Value::map_of(fields, n);
    return true;
  }
  default: return false;
  }
}

// Order of canonical bytes for top_k's ties: null < bool < number < string < array < map;
// numbers by value (NaN after every number), strings and names bytewise, arrays and maps
// element by element, then shorter first. Both inputs are valid canonical bytes.
int rank_of(std::uint8_t tag) {
  switch (tag) {
  case 'n': return 0;
  case 'b': return 1;
  case 'i':
  case 'f': return 2;
  case 's': return 3;
  case 'a': return 4;
  default: return 5;
  }
}

int compare_bytes(std::string_view a, std::string_view b) {
  int c = a.compare(b);
  return c < 0 ? -1 : c > 0 ? 1 : 0;
}

int compare_encoded(std::string_view& a, std::string_view& b) {
  Reader ra{a};
  Reader rb{b};
  std::uint8_t ta = 0;
  std::uint8_t tb = 0;
  if (!ra.u8(ta) || !rb.u8(tb)) return 0;
  if (rank_of(ta) != rank_of(tb)) return rank_of(ta) < rank_of(tb) ? -1 : 1;
  switch (ta) {
  case 'n': return 0;
  case 'b': {
    std::uint8_t x = 0;
    std::uint8_t y = 0;
    ra.u8(x);
    rb.u8(y);
    return x < y ? -1 : x > y ? 1 : 0;
  }
  case 'i':
  case 'f': {
    std::uint64_t x = 0;
    std::uint64_t y = 0;
    ra.u64(x);
    rb.u64(y);
    auto number = [](std::uint8_t tag, std::uint64_t bits) {
      if (tag == 'i') return Value::integer(static_cast<std::int64_t>(bits));
      double d;
      std::memcpy(&d, &bits, sizeof d);
      return Value::floating(d);
    };
    Value va = number(ta, x);
    Value vb = number(tb, y);
    if (is_nan(va) || is_nan(vb)) return is_nan(va) == is_nan(vb) ? 0 : is_nan(va) ? 1 : -1;
    return compare_numbers(va, vb);
  }
  case 's': {
    std::string_view x;
    std::string_view y;
    ra.bytes(x);
    rb.bytes(y);
    return compare_bytes(x, y);
  }
  default: { // 'a' or 'm'
    std::uint32_t na = 0;
    std::uint32_t nb = 0;
    ra.u32(na);
    rb.u32(nb);
    for (std::uint32_t k = 0; k < std::min(na, nb); ++k) {
      if (ta == 'm') {
        std::string_view x;
        std::string_view y;
        ra.bytes(x);
        rb.bytes(y);
        if (int c = compare_bytes(x, y)) return c;
      }
      if (int c = compare_encoded(a, b)) return c;
    }
    return na < nb ? -1 : na > nb ? 1 : 0;
  }
  }
}

bool less_encoded(std::string_view a, std::string_view b) {
  return compare_encoded(a, b) < 0;
}

// ---- a value owned by a slot ----
//
// 16 bytes, like a Value: numbers and bools inline; a string's bytes, or the stored form of an
// array or map, in a heap buffer that the slot owns and reuses while it is big enough.
struct OwnedValue {
  union {
    bool b;
    std::int64_t i;
    double f;
    char* s;
  };
  std::uint32_t size;
  Kind kind;             // Null: nothing yet
  std::uint8_t cap_log2; // 0: owns no buffer; else `s` owns 1 << cap_log2 bytes
};
static_assert(sizeof(OwnedValue) == 16);

void owned_init(OwnedValue& o) {
  o.i = 0;
  o.size = 0;
  o.kind = Kind::Null;
  o.cap_log2 = 0;
}

void owned_free(OwnedValue& o) {
  if (o.cap_log2 != 0) delete[] o.s;
  o.cap_log2 = 0;
  o.i = 0;
}

// Keeps `bytes` (a string, or the stored form of an array or map) in the slot's own buffer.
void owned_set_bytes(OwnedValue& o, Kind kind, std::string_view bytes) {
  std::uint64_t capacity = o.cap_log2 != 0 ? std::uint64_t{1} << o.cap_log2 : 0;
  if (bytes.size() > capacity || (capacity > 4096 && bytes.size() < capacity / 4)) {
    owned_free(o);
    if (!bytes.empty()) {
      std::uint64_t want = std::bit_ceil(std::max<std::uint64_t>(bytes.size(), 16));
      o.s = new char[want];
      o.cap_log2 = static_cast<std::uint8_t>(std::countr_zero(want));
    }
  }
  if (!bytes.empty()) std::memcpy(o.s, bytes.data(), bytes.size());
  if (o.cap_log2 == 0) o.s = nullptr;
  o.size = static_cast<std::uint32_t>(bytes.size());
  o.kind = kind;
}

// Sets a scalar (null, bool, int, float) or a string.
void owned_set(OwnedValue& o, const Value& v) {
  if (v.kind == Kind::String) {
    owned_set_bytes(o, Kind::String, v.str());
    return;
  }
  owned_free(o);
  o.size = 0;
  o.kind = v.kind;
  if (v.kind == Kind::Bool) o.b = v.b;
  if (v.kind == Kind::Int) o.i = v.i;
  if (v.kind == Kind::Float) o.f = v.f;
}

std::string_view owned_bytes(const OwnedValue& o) {
  return {o.s, o.size};
}

// The slot's value as a Value that points into the slot (scalars and strings only).
Value owned_view(const OwnedValue& o) {
  switch (o.kind) {
  case Kind::Bool: return Value::boolean(o.b);
  case Kind::Int: return Value::integer(o.i);
  case Kind::Float: return Value::floating(o.f);
  case Kind::String: return Value::string(owned_bytes(o));
  default: return Value::null();
  }
}

void owned_copy(OwnedValue& into, const OwnedValue& from) {
  if (from.kind == Kind::Array || from.kind == Kind::Map)
    owned_set_bytes(into, from.kind, owned_bytes(from));
  else
    owned_set(into, owned_view(from));
}

// Slot layout of min/max/first/last:
//   u8 kind (the number of state::Kind; 0 = nothing yet), then by kind:
//   Bool u8 | Int i64 | Float f64 | String u32 length, bytes |
//   Array, Map u32 length, the stored form of the value (see "value bytes")
void owned_serialize(const OwnedValue& o, std::string& out) {
  put_u8(out, static_cast<std::uint8_t>(o.kind));
  switch (o.kind) {
  case Kind::Null: break;
  case Kind::Bool: put_u8(out, o.b ? 1 : 0); break;
  case Kind::Int: put_i64(out, o.i); break;
  case Kind::Float: put_f64(out, o.f); break;
  case Kind::String:
  case Kind::Array:
  case Kind::Map: put_bytes(out, owned_bytes(o)); break;
  }
}

bool owned_deserialize(OwnedValue& o, std::string_view& in, bool containers) {
  Reader r{in};
  std::uint8_t kind;
  if (!r.u8(kind) || kind > static_cast<std::uint8_t>(Kind::Map)) return false;
  Value v;
  switch (static_cast<Kind>(kind)) {
  case Kind::Null: break;
  case Kind::Bool: {
    std::uint8_t b;
    if (!r.u8(b) || b > 1) return false;
    v = Value::boolean(b != 0);
    break;
  }
  case Kind::Int: {
    std::int64_t i;
    if (!r.i64(i)) return false;
    v = Value::integer(i);
    break;
  }
  case Kind::Float: {
    double f;
    if (!r.f64(f)) return false;
    v = Value::floating(f);
    break;
  }
  case Kind::String: {
    std::string_view s;
    if (!r.bytes(s)) return false;
    v = Value::string(s);
    break;
  }
  case Kind::Array:
  case Kind::Map: {
    std::string_view bytes;
    if (!containers || !r.bytes(bytes)) return false;
    std::string_view check = bytes;
    if (!validate_value(check) || !check.empty()) return false;
    if (static_cast<std::uint8_t>(bytes[0]) !=
        (kind == static_cast<std::uint8_t>(Kind::Array) ? 'a' : 'm'))
      return false;
    owned_set_bytes(o, static_cast<Kind>(kind), bytes);
    return true;
  }
  }
  owned_set(o, v);
  return true;
}

std::string not_a_number(const std::string& text, const Value& v) {
  return text + ": expected a number, got " + state::kind_name(v.kind);
}

// ---- count() and count(x) ----
//
// Slot: u64 records counted. Serialized: u64.

class Count final : public AggregateFunction {
public:
  explicit Count(AggregateCall call)
      : AggregateFunction(AggregateKind::Count, std::move(call.text), std::move(call.argument)),
        all_(argument() == nullptr) {}

  std::size_t state_size() const override { return sizeof(std::uint64_t); }
  std::size_t state_align() const override { return alignof(std::uint64_t); }
  void init(std::byte* slot) const override { new (slot) std::uint64_t(0); }
  bool check(const std::byte*, const Value&, std::string&) const override { return true; }
  void apply(std::byte* slot, const Value& arg) const override {
    if (all_ || !arg.is_null()) ++slot_as<std::uint64_t>(slot);
  }
  void merge(std::byte* into, const std::byte* from) const override {
    slot_as<std::uint64_t>(into) += slot_as<std::uint64_t>(from);
  }
  Value result(const std::byte* slot, state::Batch&) const override {
    return Value::integer(static_cast<std::int64_t>(slot_as<std::uint64_t>(slot)));
  }
  void serialize(const std::byte* slot, std::string& out) const override {
    put_u64(out, slot_as<std::uint64_t>(slot));
  }
  Result<void> deserialize(std::byte* slot, std::string_view& in) const override {
    if (!Reader{in}.u64(slot_as<std::uint64_t>(slot))) return truncated(kind());
    return {};
  }

private:
  bool all_; // count(): every record; count(x): records with a non-null x
};

// ---- sum(x) ----
//
// Slot: the running sum and whether it is an int or a float (16 bytes).
// Serialized: u8 state (0 = nothing yet, 1 = int, 2 = float), then i64 or f64 unless 0.
// An int sum that would overflow is a per-record error; a merge of two int sums that
// overflows cannot fail, so it turns the sum into a float.

enum class NumberState : std::uint8_t { Empty = 0, Int = 1, Float = 2 };

struct SumSlot {
  union {
    std::int64_t i;
    double f;
  };
  NumberState state;
};

class Sum final : public AggregateFunction {
public:
  explicit Sum(AggregateCall call)
      : AggregateFunction(AggregateKind::Sum, std::move(call.text), std::move(call.argument)) {}

  std::size_t state_size() const override { return sizeof(SumSlot); }
  std::size_t state_align() const override { return alignof(SumSlot); }
  void init(std::byte* slot) const override {
    auto* s = new (slot) SumSlot;
    s->i = 0;
    s->state = NumberState::Empty;
  }
  bool check(const std::byte* slot, const Value& arg, std::string& error) const override {
    if (arg.is_null()) return true;
    if (!arg.is_number()) {
      error = not_a_number(text(), arg);
      return false;
    }
    const auto& s = slot_as<SumSlot>(slot);
    std::int64_t ignored;
    if (arg.kind == Kind::Int && s.state == NumberState::Int &&
        __builtin_add_overflow(s.i, arg.i, &ignored)) {
      error = text() + ": integer overflow adding " + std::to_string(arg.i) + " to " +
              std::to_string(s.i) + " (use to_float() to sum as floats)";
      return false;
    }
    return true;
  }
  void apply(std::byte* slot, const Value& arg) const override {
    if (arg.is_number()) add_number(slot_as<SumSlot>(slot), arg);
  }
  bool check_merge(const std::byte* into, const std::byte* from, std::string& error) const override {
    const auto& f = slot_as<SumSlot>(from);
    return f.state != NumberState::Int || check(into, Value::integer(f.i), error);
  }
  void merge(std::byte* into, const std::byte* from) const override {
    const auto& f = slot_as<SumSlot>(from);
    if (f.state == NumberState::Empty) return;
    add_number(slot_as<SumSlot>(into),
               f.state == NumberState::Int ? Value::integer(f.i) : Value::floating(f.f));
  }
  Value result(const std::byte* slot, state::Batch&) const override {
    const auto& s = slot_as<SumSlot>(slot);
    switch (s.state) {
    case NumberState::Int: return Value::integer(s.i);
    case NumberState::Float: return Value::floating(s.f);
    default: return Value::null();
    }
  }
  void serialize(const std::byte* slot, std::string& out) const override {
    const auto& s = slot_as<SumSlot>(slot);
    put_u8(out, static_cast<std::uint8_t>(s.state));
    if (s.state == NumberState::Int) put_i64(out, s.i);
    if (s.state == NumberState::Float) put_f64(out, s.f);
  }
  Result<void> deserialize(std::byte* slot, std::string_view& in) const override {
    auto& s = slot_as<SumSlot>(slot);
    Reader r{in};
    std::uint8_t state;
    if (!r.u8(state) || state > 2) return truncated(kind());
    if (state != 0) {
      std::uint64_t bits;
      if (!r.u64(bits)) return truncated(kind());
      std::memcpy(&s.i, &bits, sizeof bits);
    }
    s.state = static_cast<NumberState>(state);
    return {};
  }

private:
  static void add_number(SumSlot& s, const Value& v) {
    if (s.state == NumberState::Empty) {
      s.state = v.kind == Kind::Int ? NumberState::Int : NumberState::Float;
      if (v.kind == Kind::Int)
        s.i = v.i;
      else
        s.f = v.f;
      return;
    }
    if (s.state == NumberState::Int && v.kind == Kind::Int) {
      std::int64_t sum;
      if (!__builtin_add_overflow(s.i, v.i, &sum)) {
        s.i = sum;
        return;
      }
    }
    double total = (s.state == NumberState::Int ? static_cast<double>(s.i) : s.f) + v.as_double();
    s.f = total;
    s.state = NumberState::Float;
  }
};

// ---- avg(x) ----
//
// Slot: the sum (exact as an int until a float arrives or it would overflow, then a float),
// the number of values, and the sum's state (24 bytes).
// Serialized: u8 state (0 = nothing yet, 1 = int sum, 2 = float sum), then u64 count and the
// sum as i64 or f64, unless 0.

struct AvgSlot {
  union {
    std::int64_t i;
    double f;
  };
  std::uint64_t n;
  NumberState state;
};

class Avg final : public AggregateFunction {
public:
  explicit Avg(AggregateCall call)
      : AggregateFunction(AggregateKind::Avg, std::move(call.text), std::move(call.argument)) {}

  std::size_t state_size() const override { return sizeof(AvgSlot); }
  std::size_t state_align() const override { return alignof(AvgSlot); }
  void init(std::byte* slot) const override {
    auto* s = new (slot) AvgSlot;
    s->i = 0;
    s->n = 0;
    s->state = NumberState::Empty;
  }
  bool check(const std::byte*, const Value& arg, std::string& error) const override {
    if (arg.is_null() || arg.is_number()) return true;
    error = not_a_number(text(), arg);
    return false;
  }
  void apply(std::byte* slot, const Value& arg) const override {
    if (!arg.is_number()) return;
    auto& s = slot_as<AvgSlot>(slot);
    add_sum(s, arg);
    ++s.n;
  }
  void merge(std::byte* into, const std::byte* from) const override {
    const auto& f = slot_as<AvgSlot>(from);
    if (f.state == NumberState::Empty) return;
    auto& s = slot_as<AvgSlot>(into);
    add_sum(s, f.state == NumberState::Int ? Value::integer(f.i) : Value::floating(f.f));
    s.n += f.n;
  }
  Value result(const std::byte* slot, state::Batch&) const override {
    const auto& s = slot_as<AvgSlot>(slot);
    if (s.state == NumberState::Empty || s.n == 0) return Value::null();
    double sum = s.state == NumberState::Int ? static_cast<double>(s.i) : s.f;
    return Value::floating(sum / static_cast<double>(s.n));
  }
  void serialize(const std::byte* slot, std::string& out) const override {
    const auto& s = slot_as<AvgSlot>(slot);
    put_u8(out, static_cast<std::uint8_t>(s.state));
    if (s.state == NumberState::Empty) return;
    put_u64(out, s.n);
    if (s.state == NumberState::Int) put_i64(out, s.i);
    if (s.state == NumberState::Float) put_f64(out, s.f);
  }
  Result<void> deserialize(std::byte* slot, std::string_view& in) const override {
    auto& s = slot_as<AvgSlot>(slot);
    Reader r{in};
    std::uint8_t state;
    if (!r.u8(state) || state > 2) return truncated(kind());
    if (state != 0) {
      std::uint64_t n;
      std::uint64_t bits;
      if (!r.u64(n) || !r.u64(bits) || n == 0) return truncated(kind());
      s.n = n;
      std::memcpy(&s.i, &bits, sizeof bits);
    }
    s.state = static_cast<NumberState>(state);
    return {};
  }

private:
  static void add_sum(AvgSlot& s, const Value& v) {
    if (s.state == NumberState::Empty) {
      s.state = v.kind == Kind::Int ? NumberState::Int : NumberState::Float;
      if (v.kind == Kind::Int)
        s.i = v.i;
      else
        s.f = v.f;
      return;
    }
    if (s.state == NumberState::Int && v.kind == Kind::Int) {
      std::int64_t sum;
      if (!__builtin_add_overflow(s.i, v.i, &sum)) {
        s.i = sum;
        return;
      }
    }
    double total = (s.state == NumberState::Int ? static_cast<double>(s.i) : s.f) + v.as_double();
    s.f = total;
    s.state = NumberState::Float;
  }
};

// ---- min(x), max(x) ----
//
// Slot: an OwnedValue holding an int, a float or a string (16 bytes; a string's bytes on the
// heap). Numbers compare by value across int and float (a tie keeps the earlier value, so
// min(2, 2.0) is 2); NaN loses to every other number. Strings compare bytewise. Once a slot
// holds numbers a string is a per-record error, and the other way round; a merge of a number
// slot with a string slot keeps `into`. Serialized: see owned_serialize.

class MinMax final : public AggregateFunction {
public:
  MinMax(AggregateCall call, bool is_max)
      : AggregateFunction(is_max ? AggregateKind::Max : AggregateKind::Min, std::move(call.text),
                          std::move(call.argument)),
        is_max_(is_max) {}

  std::size_t state_size() const override { return sizeof(OwnedValue); }
  std::size_t state_align() const override { return alignof(OwnedValue); }
  void init(std::byte* slot) const override { owned_init(*new (slot) OwnedValue); }
  void destroy(std::byte* slot) const override { owned_free(slot_as<OwnedValue>(slot)); }
  bool plain_bytes() const override { return false; }

  bool check(const std::byte* slot, const Value& arg, std::string& error) const override {
    if (arg.is_null()) return true;
    if (!arg.is_number() && arg.kind != Kind::String) {
      error = text() + ": expected a number or a string, got " + state::kind_name(arg.kind);
      return false;
    }
    Kind held = slot_as<OwnedValue>(slot).kind;
    if (held == Kind::Null) return true;
    bool held_number = held == Kind::Int || held == Kind::Float;
    if (held_number == arg.is_number()) return true;
    error = text() + ": cannot compare " + (arg.is_number() ? "a number" : "a string") +
            " with the " + (held_number ? "numbers" : "strings") + " before it";
    return false;
  }
  void apply(std::byte* slot, const Value& arg) const override {
    if (arg.is_null()) return;
    auto& s = slot_as<OwnedValue>(slot);
    if (replaces(arg, s)) owned_set(s, arg);
  }
  bool check_merge(const std::byte* into, const std::byte* from, std::string& error) const override {
    return check(into, owned_view(slot_as<OwnedValue>(from)), error);
  }
  void merge(std::byte* into, const std::byte* from) const override {
    const auto& f = slot_as<OwnedValue>(from);
    auto& s = slot_as<OwnedValue>(into);
    if (f.kind == Kind::Null) return;
    bool f_number = f.kind != Kind::String;
    bool s_number = s.kind != Kind::String;
    if (s.kind != Kind::Null && f_number != s_number) return; // mixed kinds: keep `into`
    if (replaces(owned_view(f), s)) owned_copy(s, f);
  }
  Value result(const std::byte* slot, state::Batch& out) const override {
    const auto& s = slot_as<OwnedValue>(slot);
    Value v = owned_view(s);
    if (v.kind == Kind::String) return Value::string(out.copy_string(v.str()));
    return v;
  }
  void serialize(const std::byte* slot, std::string& out) const override {
    owned_serialize(slot_as<OwnedValue>(slot), out);
  }
  Result<void> deserialize(std::byte* slot, std::string_view& in) const override {
    auto& s = slot_as<OwnedValue>(slot);
    if (!owned_deserialize(s, in, false) || s.kind == Kind::Bool) return truncated(kind());
    return {};
  }

private:
  // Whether `v` (of the slot's kind family, not null) should replace what the slot holds.
  bool replaces(const Value& v, const OwnedValue& s) const {
    if (s.kind == Kind::Null) return true;
    Value held = owned_view(s);
    if (v.kind == Kind::String) {
      int c = v.str().compare(held.str());
      return is_max_ ? c > 0 : c < 0;
    }
    if (is_nan(v)) return false;
    if (is_nan(held)) return true;
    int c = compare_numbers(v, held);
    return is_max_ ? c == 1 : c == -1;
  }

  bool is_max_;
};

// ---- first(x), last(x) ----
//
// Slot: an OwnedValue (16 bytes): a scalar inline, a string's bytes or an array's or map's
// stored form on the heap. The first / last non-null value in arrival order; in a merge,
// `from` counts as later than `into`. Serialized: see owned_serialize.

class FirstLast final : public AggregateFunction {
public:
  FirstLast(AggregateCall call, bool is_last, state::FieldNames& names)
      : AggregateFunction(is_last ? AggregateKind::Last : AggregateKind::First,
                          std::move(call.text), std::move(call.argument)),
        is_last_(is_last), names_(&names) {}

  std::size_t state_size() const override { return sizeof(OwnedValue); }
  std::size_t state_align() const override { return alignof(OwnedValue); }
  void init(std::byte* slot) const override { owned_init(*new (slot) OwnedValue); }
  void destroy(std::byte* slot) const override { owned_free(slot_as<OwnedValue>(slot)); }
  bool plain_bytes() const override { return false; }

  bool check(const std::byte*, const Value& arg, std::string& error) const override {
    if (depth_ok(arg)) return true;
    error = text() + ": value nested more than " + std::to_string(max_depth) + " levels";
    return false;
  }
  void apply(std::byte* slot, const Value& arg) const override {
    auto& s = slot_as<OwnedValue>(slot);
    if (arg.is_null() || (!is_last_ && s.kind != Kind::Null)) return;
    if (arg.kind == Kind::Array || arg.kind == Kind::Map) {
      scratch_.clear();
      encode_value(arg, *names_, false, scratch_);
      owned_set_bytes(s, arg.kind, scratch_);
      return;
    }
    owned_set(s, arg);
  }
  void merge(std::byte* into, const std::byte* from) const override {
    const auto& f = slot_as<OwnedValue>(from);
    auto& s = slot_as<OwnedValue>(into);
    if (f.kind == Kind::Null || (!is_last_ && s.kind != Kind::Null)) return;
    owned_copy(s, f);
  }
  Value result(const std::byte* slot, state::Batch& out) const override {
    const auto& s = slot_as<OwnedValue>(slot);
    if (s.kind == Kind::Array || s.kind == Kind::Map) {
      std::string_view bytes = owned_bytes(s);
      Value v;
      if (!decode_value(bytes, *names_, out.arena(), v)) return Value::null(); // validated earlier
      return v;
    }
    Value v = owned_view(s);
    if (v.kind == Kind::String) return Value::string(out.copy_string(v.str()));
    return v;
  }
  void serialize(const std::byte* slot, std::string& out) const override {
    owned_serialize(slot_as<OwnedValue>(slot), out);
  }
  Result<void> deserialize(std::byte* slot, std::string_view& in) const override {
    if (!owned_deserialize(slot_as<OwnedValue>(slot), in, true)) return truncated(kind());
    return {};
  }

private:
  bool is_last_;
  state::FieldNames* names_;
  mutable std::string scratch_; // the stored form of an array or map being added
};

// ---- functions keyed by canonical bytes ----

class CanonicalFunction : public AggregateFunction {
public:
  std::size_t state_size() const override { return sizeof(void*); }
  std::size_t state_align() const override { return alignof(void*); }
  void init(std::byte* slot) const override { new (slot) void*(nullptr); }
  void destroy(std::byte* slot) const override { free_state(slot_as<void*>(slot)); }
  bool plain_bytes() const override { return false; }

  bool check(const std::byte*, const Value& arg, std::string& error) const override {
    if (depth_ok(arg)) return true;
    error = text() + ": value nested more than " + std::to_string(max_depth) + " levels";
    return false;
  }

protected:
  CanonicalFunction(AggregateKind kind, std::string text,
                    std::optional<pipeline::Expression> argument, state::FieldNames& names)
      : AggregateFunction(kind, std::move(text), std::move(argument)), names_(&names) {}

  // The heap state a slot points to (null until the first non-null value).
  template <typename T> static T* state_of(const std::byte* slot) {
    return static_cast<T*>(slot_as<void*>(slot));
  }
  template <typename T> static T& make_state(std::byte* slot) {
    void*& p = slot_as<void*>(slot);
    if (p == nullptr) p = new T;
    return *static_cast<T*>(p);
  }
  virtual void free_state(void* p) const = 0;

  // The canonical bytes of `v`, in a buffer reused from call to call.
  const std::string& canonical(const Value& v) const {
    scratch_.clear();
    encode_value(v, *names_, true, scratch_);
    return scratch_;
  }

  state::FieldNames* names_;

private:
  mutable std::string scratch_;
};

// ---- count_distinct(x) ----
//
// Slot: a pointer to a hash set of canonical bytes (null until the first non-null value).
// Serialized: u32 n, then n × (u32 length, canonical bytes), in ascending byte order so that
// equal states serialize to equal bytes.

using DistinctSet = std::unordered_set<std::string>;

class CountDistinct final : public CanonicalFunction {
public:
  CountDistinct(AggregateCall call, state::FieldNames& names)
      : CanonicalFunction(AggregateKind::CountDistinct, std::move(call.text),
                          std::move(call.argument), names) {}

  void apply(std::byte* slot, const Value& arg) const override {
    if (arg.is_null()) return;
    const std::string& key = canonical(arg);
    auto& set = make_state<DistinctSet>(slot);
    if (set.find(key) == set.end()) set.insert(key);
  }
  void merge(std::byte* into, const std::byte* from) const override {
    const auto* f = state_of<DistinctSet>(from);
    if (f == nullptr || f->empty()) return;
    make_state<DistinctSet>(into).insert(f->begin(), f->end());
  }
  Value result(const std::byte* slot, state::Batch&) const override {
    const auto* set = state_of<DistinctSet>(slot);
    return Value::integer(set == nullptr ? 0 : static_cast<std::int64_t>(set->size()));
  }
  void serialize(const std::byte* slot, std::string& out) const override {
    std::vector<std::string_view> keys;
    if (const auto* set = state_of<DistinctSet>(slot)) keys.assign(set->begin(), set->end());
    std::sort(keys.begin(), keys.end());
    put_u32(out, static_cast<std::uint32_t>(keys.size()));
    for (auto key : keys)
      put_bytes(out, key);
  }
  Result<void> deserialize(std::byte* slot, std::string_view& in) const override {
    Reader r{in};
    std::uint32_t n;
    if (!r.u32(n) || n > in.size() / 5) return truncated(kind());
    if (n == 0) return {};
    auto& set = make_state<DistinctSet>(slot);
    set.reserve(n);
    for (std::uint32_t k = 0; k < n; ++k) {
      std::string_view key;
      if (!r.bytes(key)) return truncated(kind());
      std::string_view check = key;
      if (!validate_value(check) || !check.empty()) return truncated(kind());
      set.emplace(key);
    }
    return {};
  }

private:
  void free_state(void* p) const override { delete static_cast<DistinctSet*>(p); }
};

// ---- approx_count_distinct(x) ----
//
// Slot: a pointer to a HyperLogLog (null until the first non-null value); the hash of a value
// is XXH3-64 (seed 0) of its canonical bytes, whose output xxhash guarantees stable across
// versions and machines. Serialized: u8 0 (no sketch) | u8 1 followed by the sketch
// (HyperLogLog::serialize).

class ApproxCountDistinct final : public CanonicalFunction {
public:
  ApproxCountDistinct(AggregateCall call, state::FieldNames& names)
      : CanonicalFunction(AggregateKind::ApproxCountDistinct, std::move(call.text),
                          std::move(call.argument), names) {}

  void apply(std::byte* slot, const Value& arg) const override {
    if (arg.is_null()) return;
    const std::string& key = canonical(arg);
    make_state<HyperLogLog>(slot).add_hash(XXH3_64bits(key.data(), key.size()));
  }
  void merge(std::byte* into, const std::byte* from) const override {
    if (const auto* f = state_of<HyperLogLog>(from)) make_state<HyperLogLog>(into).merge(*f);
  }
  Value result(const std::byte* slot, state::Batch&) const override {
    const auto* h = state_of<HyperLogLog>(slot);
    return Value::integer(h == nullptr ? 0 : std::llround(h->estimate()));
  }
  void serialize(const std::byte* slot, std::string& out) const override {
    const auto* h = state_of<HyperLogLog>(slot);
    put_u8(out, h != nullptr ? 1 : 0);
    if (h != nullptr) h->serialize(out);
  }
  Result<void> deserialize(std::byte* slot, std::string_view& in) const override {
    std::uint8_t present;
    if (!Reader{in}.u8(present) || present > 1) return truncated(kind());
    if (present == 0) return {};
    auto ok = make_state<HyperLogLog>(slot).deserialize(in);
    if (!ok) return fail(std::string(aggregate_kind_name(kind())) + ": " + ok.error());
    return {};
  }

private:
  void free_state(void* p) const override { delete static_cast<HyperLogLog*>(p); }
};

// ---- top_k(x, k) ----
//
// Slot: a pointer to a hash map from canonical bytes to the number of times the value was
// seen (null until the first non-null value). Counting is exact (not Space-Saving), so merges
// are exact and memory grows with the number of distinct values.
// Result: an array of at most k maps {"value": v, "count": n}, by count descending, then by
// value (see compare_encoded). A value comes back in canonical form: 2.0 as 2, map members
// sorted by name.
// Serialized: u32 n, then n × (u32 length, canonical bytes, u64 count >= 1), in ascending byte
// order of the canonical bytes.

using CountMap = std::unordered_map<std::string, std::uint64_t>;

class TopK final : public CanonicalFunction {
public:
  TopK(AggregateCall call, state::FieldNames& names)
      : CanonicalFunction(AggregateKind::TopK, std::move(call.text), std::move(call.argument),
                          names),
        k_(call.k), value_field_(names.intern("value")), count_field_(names.intern("count")) {}

  void apply(std::byte* slot, const Value& arg) const override {
    if (arg.is_null()) return;
    const std::string& key = canonical(arg);
    auto& counts = make_state<CountMap>(slot);
    auto it = counts.find(key);
    if (it != counts.end())
      ++it->second;
    else
      counts.emplace(key, 1);
  }
  void merge(std::byte* into, const std::byte* from) const override {
    const auto* f = state_of<CountMap>(from);
    if (f == nullptr || f->empty()) return;
    auto& counts = make_state<CountMap>(into);
    for (const auto& [key, n] : *f)
      counts[key] += n;
  }
  Value result(const std::byte* slot, state::Batch& out) const override {
    const auto* counts = state_of<CountMap>(slot);
    if (counts == nullptr || counts->empty()) return Value::array_of(nullptr, 0);
    std::vector<std::pair<std::uint64_t, std::string_view>> entries;
    entries.reserve(counts->size());
    for (const auto& [key, n] : *counts)
      entries.emplace_back(n, key);
    auto top = std::min<std::size_t>(k_, entries.size());
    std::partial_sort(entries.begin(), entries.begin() + static_cast<std::ptrdiff_t>(top),
                      entries.end(), [](const auto& a, const auto& b) {
                        if (a.first != b.first) return a.first > b.first;
                        return less_encoded(a.second, b.second);
                      });
    state::Arena& arena = out.arena();
    Value* items = arena.allocate_array<Value>(top);
    for (std::size_t k = 0; k < top; ++k) {
      auto* fields = arena.allocate_array<state::Field>(2);
      Value v;
      std::string_view bytes = entries[k].second;
      if (!decode_value(bytes, *names_, arena, v)) v = Value::null(); // validated on the way in
      new (&fields[0]) state::Field{value_field_, v};
      new (&fields[1])
          state::Field{count_field_, Value::integer(static_cast<std::int64_t>(entries[k].first))};
      new (&items[k]) Value(Value::map_of(fields, 2));
    }
    return Value::array_of(items, static_cast<std::uint32_t>(top));
  }
  void serialize(const std::byte* slot, std::string& out) const override {
    std::vector<const CountMap::value_type*> entries;
    if (const auto* counts = state_of<CountMap>(slot))
      for (const auto& entry : *counts)
        entries.push_back(&entry);
    std::sort(entries.begin(), entries.end(),
              [](const auto* a, const auto* b) { return a->first < b->first; });
    put_u32(out, static_cast<std::uint32_t>(entries.size()));
    for (const auto* entry : entries) {
      put_bytes(out, entry->first);
      put_u64(out, entry->second);
    }
  }
  Result<void> deserialize(std::byte* slot, std::string_view& in) const override {
    Reader r{in};
    std::uint32_t n;
    if (!r.u32(n) || n > in.size() / 13) return truncated(kind());
    if (n == 0) return {};
    auto& counts = make_state<CountMap>(slot);
    counts.reserve(n);
    for (std::uint32_t k = 0; k < n; ++k) {
      std::string_view key;
      std::uint64_t count;
      if (!r.bytes(key) || !r.u64(count) || count == 0) return truncated(kind());
      std::string_view check = key;
      if (!validate_value(check) || !check.empty()) return truncated(kind());
      counts[std::string(key)] += count;
    }
    return {};
  }

private:
  void free_state(void* p) const override { delete static_cast<CountMap*>(p); }

  std::uint32_t k_;
  state::FieldId value_field_;
  state::FieldId count_field_;
};

} // namespace

std::unique_ptr<AggregateFunction> make_aggregate_function(AggregateCall call,
                                                           state::FieldNames& names) {
  switch (call.kind) {
  case AggregateKind::Count: return std::make_unique<Count>(std::move(call));
  case AggregateKind::Sum: return std::make_unique<Sum>(std::move(call));
  case AggregateKind::Avg: return std::make_unique<Avg>(std::move(call));
  case AggregateKind::Min: return std::make_unique<MinMax>(std::move(call), false);
  case AggregateKind::Max: return std::make_unique<MinMax>(std::move(call), true);
  case AggregateKind::First: return std::make_unique<FirstLast>(std::move(call), false, names);
  case AggregateKind::Last: return std::make_unique<FirstLast>(std::move(call), true, names);
  case AggregateKind::CountDistinct: return std::make_unique<CountDistinct>(std::move(call), names);
  case AggregateKind::ApproxCountDistinct:
    return std::make_unique<ApproxCountDistinct>(std::move(call), names);
  case AggregateKind::TopK: return std::make_unique<TopK>(std::move(call), names);
  }
  throw Error(ErrorKind::Internal, "unknown aggregate function");
}

} // namespace streamctl::operators
