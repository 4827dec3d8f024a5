#include "state/json_writer.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "state/json_scan.hpp"
#include "state/short_copy.hpp"
#include "state/utf8.hpp"

namespace streamctl::state {

namespace {

// For each byte: 0 if it is written as is, else the letter of its short escape ('"', '\\', 'b',
// 'f', 'n', 'r', 't'), 'u' for \u00XX, or 'v' for a non-ASCII byte, whose sequence must be
// checked to be UTF-8.
constexpr std::array<char, 256> make_escape_table() {
  std::array<char, 256> t{};
  for (int c = 0; c < 0x20; ++c) t[static_cast<std::size_t>(c)] = 'u';
  for (int c = 0x80; c < 0x100; ++c) t[static_cast<std::size_t>(c)] = 'v';
  t['\b'] = 'b';
  t['\f'] = 'f';
  t['\n'] = 'n';
  t['\r'] = 'r';
  t['\t'] = 't';
  t['"'] = '"';
  t['\\'] = '\\';
  return t;
}
constexpr std::array<char, 256> escape_table = make_escape_table();

// "00" to "99".
constexpr std::array<char, 200> make_digit_pairs() {
  std::array<char, 200> t{};
  for (int k = 0; k < 100; ++k) {
    t[static_cast<std::size_t>(2 * k)] = static_cast<char>('0' + k / 10);
    t[static_cast<std::size_t>(2 * k + 1)] = static_cast<char>('0' + k % 10);
  }
  return t;
}
constexpr std::array<char, 200> digit_pairs = make_digit_pairs();

// The eight digits of x < 100,000,000, with leading zeros, at q.
inline void write_8_digits(std::uint32_t x, char* q) {
  const std::uint32_t high = x / 10000;
  const std::uint32_t low = x % 10000;
  const std::size_t pairs[4] = {high / 100, high % 100, low / 100, low % 100};
  for (std::size_t k = 0; k < 4; ++k) std::memcpy(q + 2 * k, &digit_pairs[pairs[k] * 2], 2);
}

} // namespace

// std::to_chars's text of v at p (room for 20 bytes); returns its end. Two digits per step from
// the end of a buffer of the counted length: to_chars for ints was a third of the writer's time
// (Nexmark q0), most of it in its digit count and its division loop by one digit.
char* write_int(std::int64_t v, char* p) {
  std::uint64_t u = static_cast<std::uint64_t>(v);
  if (v < 0) {
    *p++ = '-';
    u = 0 - u; // two's complement: right for INT64_MIN too
  }
  // The digit count from the bit length (1233/4096 ~ log10 2), corrected by one comparison:
  // a loop of divisions by 10 was most of this function for 13-digit timestamps.
  static constexpr std::array<std::uint64_t, 20> powers = [] {
    std::array<std::uint64_t, 20> t{};
    std::uint64_t x = 1;
    for (auto& e : t) {
      e = x;
      x *= 10;
    }
    return t;
  }();
  const int bits = 64 - std::countl_zero(u | 1);
  int n = (bits * 1233) >> 12;
  n += (n < 20 && u >= powers[static_cast<std::size_t>(n)]) ? 1 : 0;
  n = std::max(n, 1);
  char* end = p + n;
  char* q = end;
  // Eight digits at a time from the end: the four pairs of a chunk come from independent
  // divisions, where the loop below waits for each u / 100 before the next (a 13-digit
  // timestamp was six of them in a row).
  while (u >= 100000000) {
    const auto chunk = static_cast<std::uint32_t>(u % 100000000);
    u /= 100000000;
    q -= 8;
    write_8_digits(chunk, q);
  }
  // Below 10^8 now: 32-bit divisions by 100, half the instructions of 64-bit ones (a multiply
  // by the reciprocal and a shift), and each pair one 2-byte store.
  auto w = static_cast<std::uint32_t>(u);
  while (w >= 100) {
    const std::uint32_t pair = w % 100;
    w /= 100;
    q -= 2;
    std::memcpy(q, &digit_pairs[pair * 2], 2);
  }
  if (w >= 10) {
    q -= 2;
    std::memcpy(q, &digit_pairs[w * 2], 2);
  } else {
    *--q = static_cast<char>('0' + w);
  }
  return end;
}

namespace {

void append_int(std::int64_t v, std::string& out) {
  char buf[24];
  out.append(buf, write_int(v, buf));
}

// append_float's text at `p` (room for 28 bytes); returns its end.
char* write_float(double f, char* p) {
  if (!std::isfinite(f)) {
    std::memcpy(p, "null", 4);
    return p + 4;
  }
  char* end = std::to_chars(p, p + 26, f).ptr;
  // Keep the float a float when read back: "2" -> "2.0" ("1e+20" already reads as a float).
  if (std::find_if(p, end, [](char c) { return c == '.' || c == 'e'; }) == end) {
    std::memcpy(end, ".0", 2);
    end += 2;
  }
  return end;
}

void append_float(double f, std::string& out) {
  if (!std::isfinite(f)) {
    out += "null";
    return;
  }
  char buf[40];
  auto r = std::to_chars(buf, buf + sizeof buf, f);
  out.append(buf, r.ptr);
  // Keep the float a float when read back: "2" -> "2.0" ("1e+20" already reads as a float).
  if (std::find_if(buf, r.ptr, [](char c) { return c == '.' || c == 'e'; }) == r.ptr)
    out += ".0";
}

void append_canonical_float(double f, std::string& out) {
  if (!std::isfinite(f)) {
    out += "null";
    return;
  }
  if (f >= -9223372036854775808.0 && f < 9223372036854775808.0 && std::trunc(f) == f) {
    append_int(static_cast<std::int64_t>(f), out); // -0.0 becomes 0
    return;
  }
  char buf[40];
  auto r = std::to_chars(buf, buf + sizeof buf, f);
  out.append(buf, r.ptr);
}

void append_canonical(const Value& v, const FieldNames& names, std::string& out) {
  switch (v.kind) {
  case Kind::Int: append_int(v.i, out); return;
  case Kind::Float: append_canonical_float(v.f, out); return;
  case Kind::Array:
    out += '[';
    for (std::uint32_t k = 0; k < v.size; ++k) {
      if (k != 0) out += ',';
      append_canonical(v.array[k], names, out);
    }
    out += ']';
    return;
  case Kind::Map: {
    std::vector<const Field*> order(v.size);
    for (std::uint32_t k = 0; k < v.size; ++k) order[k] = &v.map[k];
    std::stable_sort(order.begin(), order.end(), [&](const Field* a, const Field* b) {
      return names.name(a->name) < names.name(b->name);
    });
    out += '{';
    for (std::size_t k = 0; k < order.size(); ++k) {
      if (k != 0) out += ',';
      append_json_string(names.name(order[k]->name), out);
      out += ':';
      append_canonical(order[k]->value, names, out);
    }
    out += '}';
    return;
  }
  default: append_json_value(v, names, out); return;
  }
}

} // namespace

namespace {

// A string with nothing to escape, between quotes.
void append_quoted(std::string_view s, std::string& out) {
  out += '"';
  out.append(s);
  out += '"';
}

} // namespace

void append_json_string(std::string_view s, std::string& out) {
  const char* run = s.data();
  const char* end = s.data() + s.size();
  const char* first = find_json_special(run, end);
  if (first == end) { // the common case: ASCII with nothing to escape, copied at once
    append_quoted(s, out);
    return;
  }
  out += '"';
  for (const char* p = first; p < end; ++p) {
    char e = escape_table[static_cast<unsigned char>(*p)];
    if (e == 0) continue;
    if (e == 'v') {
      std::size_t n = utf8_sequence_length(p, end);
      if (n != 0) {
        p += n - 1; // a valid sequence is written as is
        continue;
      }
      out.append(run, p);
      out.append("\xEF\xBF\xBD"); // U+FFFD REPLACEMENT CHARACTER, for this one byte
      run = p + 1;
      continue;
    }
    out.append(run, p);
    if (e == 'u') {
      static constexpr char hex[] = "0123456789abcdef";
      auto c = static_cast<unsigned char>(*p);
      char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
      out.append(u, 6);
    } else {
      char two[2] = {'\\', e};
      out.append(two, 2);
    }
    run = p + 1;
  }
  out.append(run, end);
  out += '"';
}

void append_json_value(const Value& v, const FieldNames& names, std::string& out) {
  switch (v.kind) {
  case Kind::Null: out += "null"; return;
  case Kind::Bool: out += v.b ? "true" : "false"; return;
  case Kind::Int: append_int(v.i, out); return;
  case Kind::Float: append_float(v.f, out); return;
  case Kind::String:
    if (v.is_json_plain())
      append_quoted(v.str(), out);
    else
      append_json_string(v.str(), out);
    return;
  case Kind::Array:
    out += '[';
    for (std::uint32_t k = 0; k < v.size; ++k) {
      if (k != 0) out += ',';
      append_json_value(v.array[k], names, out);
    }
    out += ']';
    return;
  case Kind::Map:
    out += '{';
    for (std::uint32_t k = 0; k < v.size; ++k) {
      if (k != 0) out += ',';
      append_json_string(names.name(v.map[k].name), out);
      out += ':';
      append_json_value(v.map[k].value, names, out);
    }
    out += '}';
    return;
  }
  out += "null";
}

void append_json(const Record& r, const FieldNames& names, std::string& out) {
  out += '{';
  for (std::uint32_t k = 0; k < r.size; ++k) {
    if (k != 0) out += ',';
    append_json_string(names.name(r.fields[k].name), out);
    out += ':';
    append_json_value(r.fields[k].value, names, out);
  }
  out += '}';
}

const std::string& JsonRecordWriter::make_key_text(FieldId id) {
  if (id >= keys_.size()) keys_.resize(static_cast<std::size_t>(id) + 1);
  std::string& key = keys_[id];
  if (key.empty()) {
    append_json_string(names_.name(id), key);
    key += ':';
  }
  return key;
}

// The most bytes the value's text takes when it is a scalar with nothing to escape; 0 when it
// is not (an array, a map, or a string with a byte to escape or check): the record then takes
// the general path.
std::size_t JsonRecordWriter::plain_bound(const Value& v) {
  switch (v.kind) {
  case Kind::Null:
  case Kind::Bool: return 5;
  case Kind::Int: return 20;             // "-9223372036854775808"
  case Kind::Float: return 24 + 2 + 2;   // the shortest double text, ".0", slack
  case Kind::String: {
    std::string_view s = v.str();
    if (v.is_json_plain()) return s.size() + 2;
    return find_json_special(s.data(), s.data() + s.size()) == s.data() + s.size() ? s.size() + 2 : 0;
  }
  default: return 0;
  }
}

void JsonRecordWriter::append(const Record& r, std::string& out) {
  // Most records are flat, with strings that need no escapes: their text is written through a
  // pointer into scratch space and appended at once, rather than by a dozen small appends,
  // each checking the string's capacity (a third of the CPU of writing, measured on Nexmark's
  // bids). One pass over the fields: each one's room is checked as it comes (a pass to bound
  // the whole record first looked every field and its name up twice). The text is the same as
  // append_json's; a field that is not plain sends the whole record to the general path.
  if (r.size == 0) {
    out += "{}";
    return;
  }
  char* p = scratch_.data();
  char* limit = p + scratch_.size();
  for (std::uint32_t k = 0; k < r.size; ++k) {
    const Value& v = r.fields[k].value;
    const std::size_t value = plain_bound(v);
    if (value == 0) return append_general(r, out);
    const std::string& key = key_text(r.fields[k].name);
    // '{' or ',', the name, the value, and the closing '}' should this be the last.
    const std::size_t need = 1 + key.size() + value + 1;
    if (static_cast<std::size_t>(limit - p) < need) {
      const auto at = static_cast<std::size_t>(p - scratch_.data());
      scratch_.resize(std::max(at + need, 2 * scratch_.size()));
      p = scratch_.data() + at;
      limit = scratch_.data() + scratch_.size();
    }
    *p++ = k == 0 ? '{' : ',';
    copy_short(p, key.data(), key.size());
    p += key.size();
    switch (v.kind) {
    case Kind::Null: std::memcpy(p, "null", 4); p += 4; break;
    case Kind::Bool:
      if (v.b) {
        std::memcpy(p, "true", 4);
        p += 4;
      } else {
        std::memcpy(p, "false", 5);
        p += 5;
      }
      break;
    case Kind::Int: p = write_int(v.i, p); break;
    case Kind::Float: p = write_float(v.f, p); break;
    default: { // a string with nothing to escape (plain_bound)
      std::string_view s = v.str();
      *p++ = '"';
      copy_short(p, s.data(), s.size()); // copies nothing of an empty string (data may be null)
      p += s.size();
      *p++ = '"';
      break;
    }
    }
  }
  *p++ = '}';
  out.append(scratch_.data(), p);
}

void JsonRecordWriter::append_general(const Record& r, std::string& out) {
  out += '{';
  for (std::uint32_t k = 0; k < r.size; ++k) {
    if (k != 0) out += ',';
    out += key_text(r.fields[k].name);
    append_json_value(r.fields[k].value, names_, out);
  }
  out += '}';
}

std::string canonical_json(const Value& v, const FieldNames& names) {
  std::string out;
  append_canonical(v, names, out);
  return out;
}

std::string canonical_json(const Record& r, const FieldNames& names) {
  return canonical_json(Value::map_of(r.fields, r.size), names);
}

} // namespace streamctl::state
