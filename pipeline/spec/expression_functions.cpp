// The functions of SPEC §5. Arguments arrive evaluated, non-null when the function propagates
// nulls, and of the kinds its table entry declares (the evaluator checks both). Results that
// are substrings of an argument point into it (trim, substr, split); new text goes into the
// caller's arena, written in two passes (measure, then write) so nothing touches the heap.

#include "pipeline/spec/expression_functions.hpp"
#include "pipeline/spec/edit_distance.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <time.h>

namespace streamctl::pipeline::expr {

using state::Kind;
using state::Value;

namespace {

constexpr FunctionInfo function_table[] = {
    // name, fn, min, max, params, result, nulls_propagate, pure
    {"if", Fn::If, 3, 3, {any_mask, any_mask, any_mask}, any_mask, false, true},
    {"len", Fn::Len, 1, 1, {string_mask | array_mask | map_mask}, int_mask, true, true},
    {"lower", Fn::Lower, 1, 1, {string_mask}, string_mask, true, true},
    {"upper", Fn::Upper, 1, 1, {string_mask}, string_mask, true, true},
    {"trim", Fn::Trim, 1, 1, {string_mask}, string_mask, true, true},
    {"substr", Fn::Substr, 2, 3, {string_mask, int_mask, int_mask}, string_mask, true, true},
    {"contains", Fn::Contains, 2, 2, {string_mask, string_mask}, bool_mask, true, true},
    {"starts_with", Fn::StartsWith, 2, 2, {string_mask, string_mask}, bool_mask, true, true},
    {"ends_with", Fn::EndsWith, 2, 2, {string_mask, string_mask}, bool_mask, true, true},
    {"split", Fn::Split, 2, 2, {string_mask, string_mask}, array_mask, true, true},
    {"concat", Fn::Concat, 1, variadic, {any_mask}, string_mask, false, true},
    {"to_int", Fn::ToInt, 1, 1, {bool_mask | number_mask | string_mask}, int_mask, true, true},
    {"to_float",
     Fn::ToFloat,
     1,
     1,
     {bool_mask | number_mask | string_mask},
     float_mask,
     true,
     true},
    {"to_string", Fn::ToString, 1, 1, {any_mask}, string_mask, true, true},
    {"abs", Fn::Abs, 1, 1, {number_mask}, number_mask, true, true},
    {"floor", Fn::Floor, 1, 1, {number_mask}, int_mask, true, true},
    {"ceil", Fn::Ceil, 1, 1, {number_mask}, int_mask, true, true},
    {"round", Fn::Round, 1, 1, {number_mask}, int_mask, true, true},
    {"min",
     Fn::Min,
     1,
     variadic,
     {number_mask | string_mask},
     number_mask | string_mask,
     true,
     true},
    {"max",
     Fn::Max,
     1,
     variadic,
     {number_mask | string_mask},
     number_mask | string_mask,
     true,
     true},
    {"hash", Fn::Hash, 1, 1, {any_mask}, int_mask, true, true},
    {"now", Fn::Now, 0, 0, {}, int_mask, true, false},
    {"parse_time", Fn::ParseTime, 1, 2, {string_mask, string_mask}, int_mask, true, true},
    {"format_time", Fn::FormatTime, 1, 2, {number_mask, string_mask}, string_mask, true, true},
    {"regex_match", Fn::RegexMatch, 2, 2, {string_mask, string_mask}, bool_mask, true, true},
    // Not pure: folding burn(100) at compile time would burn once instead of per record.
    {"burn", Fn::Burn, 1, 1, {int_mask}, int_mask, true, false},
};

// A call's text for messages, shortened: an expression may be long.
std::string quote(std::string_view text) {
  if (text.size() > 120) return "'" + std::string(text.substr(0, 117)) + "...'";
  return "'" + std::string(text) + "'";
}

bool fail_in(Env& env, const Node& call, const std::string& message) {
  return fail(env, message + " in " + quote(call.text));
}

bool is_ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

std::string_view trim_view(std::string_view s) {
  while (!s.empty() && is_ascii_space(s.front()))
    s.remove_prefix(1);
  while (!s.empty() && is_ascii_space(s.back()))
    s.remove_suffix(1);
  return s;
}

// ---- writing text in two passes ----

struct CountSink {
  std::size_t n = 0;
  void put(char) { ++n; }
  void put(std::string_view s) { n += s.size(); }
};

struct WriteSink {
  char* p;
  void put(char c) { *p++ = c; }
  void put(std::string_view s) {
    if (s.empty()) return;
    std::memcpy(p, s.data(), s.size());
    p += s.size();
  }
};

constexpr int max_value_depth = 128; // nesting of arrays and maps that to_string and hash walk

// Shortest text that reads back as the same double, with ".0" added to integral values so
// that a float stays recognisable as one.
std::string_view format_double(double d, std::array<char, 40>& buf) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  auto [ptr, ec] = std::to_chars(buf.data(), buf.data() + buf.size() - 2, d);
  if (ec != std::errc()) return "nan";
  std::string_view s(buf.data(), static_cast<std::size_t>(ptr - buf.data()));
  if (s.find_first_of(".e") == std::string_view::npos) {
    *ptr++ = '.';
    *ptr++ = '0';
  }
  return {buf.data(), static_cast<std::size_t>(ptr - buf.data())};
}

std::string_view format_int(std::int64_t i, std::array<char, 40>& buf) {
  auto [ptr, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), i);
  (void)ec;
  return {buf.data(), static_cast<std::size_t>(ptr - buf.data())};
}

std::string_view field_name(const state::FieldNames* names, state::FieldId id,
                            std::array<char, 40>& buf) {
  if (names != nullptr && id < names->size()) return names->name(id);
  buf[0] = '#'; // a map built with other FieldNames: no name to show
  auto [ptr, ec] = std::to_chars(buf.data() + 1, buf.data() + buf.size(), id);
  (void)ec;
  return {buf.data(), static_cast<std::size_t>(ptr - buf.data())};
}

template <typename Sink> void write_json_string(std::string_view s, Sink& out) {
  static const char hex[] = "0123456789abcdef";
  out.put('"');
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    switch (c) {
    case '"': out.put("\\\""); break;
    case '\\': out.put("\\\\"); break;
    case '\n': out.put("\\n"); break;
    case '\t': out.put("\\t"); break;
    case '\r': out.put("\\r"); break;
    default:
      if (u < 0x20) {
        out.put("\\u00");
        out.put(hex[u >> 4]);
        out.put(hex[u & 15]);
      } else {
        out.put(c);
      }
    }
  }
  out.put('"');
}

// The text form of a value: strings as they are (JSON-quoted when nested), null as "" at the
// top (concat) and `null` when nested; non-finite floats are null inside JSON.
template <typename Sink>
bool write_text(const Value& v, const state::FieldNames* names, Sink& out, int depth) {
  if (depth > max_value_depth) return false;
  bool nested = depth > 0;
  std::array<char, 40> buf;
  switch (v.kind) {
  case Kind::Null:
    if (nested) out.put("null");
    return true;
  case Kind::Bool: out.put(v.b ? "true" : "false"); return true;
  case Kind::Int: out.put(format_int(v.i, buf)); return true;
  case Kind::Float:
    if (nested && !std::isfinite(v.f))
      out.put("null");
    else
      out.put(format_double(v.f, buf));
    return true;
  case Kind::String:
    if (nested)
      write_json_string(v.str(), out);
    else
      out.put(v.str());
    return true;
  case Kind::Array:
    out.put('[');
    for (std::uint32_t k = 0; k < v.size; ++k) {
      if (k > 0) out.put(',');
      if (!write_text(v.array[k], names, out, depth + 1)) return false;
    }
    out.put(']');
    return true;
  case Kind::Map:
    out.put('{');
    for (std::uint32_t k = 0; k < v.size; ++k) {
      if (k > 0) out.put(',');
      write_json_string(field_name(names, v.map[k].name, buf), out);
      out.put(':');
      if (!write_text(v.map[k].value, names, out, depth + 1)) return false;
    }
    out.put('}');
    return true;
  }
  return true;
}

// ---- hashing ----
//
// hash(x) is FNV-1a 64 over the canonical bytes of x, then the murmur3 fmix64 finalizer so
// that nearby inputs spread over all bits. Canonical bytes, multi-byte numbers little-endian:
//   null   'n'
//   bool   'b' u8(0|1)
//   int    'i' i64          (also a float with an integral value that fits: 2.0 hashes as 2,
//                            as 2 == 2.0)
//   float  'f' u64 IEEE-754 bits (every NaN as 0x7ff8000000000000)
//   string 's' u32 length, bytes
//   array  'a' u32 count, elements
//   map    'm' u32 count, u64 wrapping sum over entries of fnv('k' u32 len name, value) so
//          that field order does not matter; names are hashed as text, never as FieldIds
// This format is a contract: changing it changes every key that was hashed with it.

bool float_as_int(double d, std::int64_t& out) {
  if (!std::isfinite(d) || d != std::trunc(d)) return false;
  if (d < -9223372036854775808.0 || d >= 9223372036854775808.0) return false;
  out = static_cast<std::int64_t>(d);
  return true;
}

bool hash_into(Fnv& h, const Value& v, const state::FieldNames* names, int depth) {
  if (depth > max_value_depth) return false;
  switch (v.kind) {
  case Kind::Null: h.byte('n'); return true;
  case Kind::Bool:
    h.byte('b');
    h.byte(v.b ? 1 : 0);
    return true;
  case Kind::Int:
    h.byte('i');
    h.u64(static_cast<std::uint64_t>(v.i));
    return true;
  case Kind::Float: {
    std::int64_t as_int;
    if (float_as_int(v.f, as_int)) {
      h.byte('i');
      h.u64(static_cast<std::uint64_t>(as_int));
      return true;
    }
    std::uint64_t bits = 0x7ff8000000000000ULL;
    if (!std::isnan(v.f)) std::memcpy(&bits, &v.f, sizeof bits);
    h.byte('f');
    h.u64(bits);
    return true;
  }
  case Kind::String:
    h.byte('s');
    h.u32(v.size);
    h.bytes(v.str());
    return true;
  case Kind::Array:
    h.byte('a');
    h.u32(v.size);
    for (std::uint32_t k = 0; k < v.size; ++k)
      if (!hash_into(h, v.array[k], names, depth + 1)) return false;
    return true;
  case Kind::Map: {
    h.byte('m');
    h.u32(v.size);
    std::uint64_t sum = 0;
    std::array<char, 40> buf;
    for (std::uint32_t k = 0; k < v.size; ++k) {
      Fnv entry;
      std::string_view name = field_name(names, v.map[k].name, buf);
      entry.byte('k');
      entry.u32(static_cast<std::uint32_t>(name.size()));
      entry.bytes(name);
      if (!hash_into(entry, v.map[k].value, names, depth + 1)) return false;
      sum += entry.h;
    }
    h.u64(sum);
    return true;
  }
  }
  return true;
}

// ---- time ----

constexpr std::int64_t ms_per_day = 86'400'000;
// 0000-01-01T00:00:00Z and 9999-12-31T23:59:59.999Z: the years format_time can write.
constexpr std::int64_t min_time_ms = -62'167'219'200'000;
constexpr std::int64_t max_time_ms = 253'402'300'799'999;

// Howard Hinnant's days_from_civil / civil_from_days (proleptic Gregorian calendar).
std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

void civil_from_days(std::int64_t z, std::int64_t& y, unsigned& m, unsigned& d) {
  z += 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const auto doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  y = static_cast<std::int64_t>(yoe) + era * 400;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  d = doy - (153 * mp + 2) / 5 + 1;
  m = mp < 10 ? mp + 3 : mp - 9;
  y += m <= 2;
}

bool is_leap(std::int64_t y) {
  return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

unsigned days_in_month(std::int64_t y, unsigned m) {
  static constexpr unsigned days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && is_leap(y) ? 29 : days[m - 1];
}

constexpr const char* month_names[] = {"January",   "February", "March",    "April",
                                       "May",       "June",     "July",     "August",
                                       "September", "October",  "November", "December"};
constexpr const char* weekday_names[] = {"Sunday",   "Monday", "Tuesday", "Wednesday",
                                         "Thursday", "Friday", "Saturday"};

char lower_ascii(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

bool starts_with_nocase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (std::size_t k = 0; k < prefix.size(); ++k)
    if (lower_ascii(s[k]) != lower_ascii(prefix[k])) return false;
  return true;
}

// Directives understood by parse_time and format_time.
bool known_directive(char d) {
  return std::string_view("YmdeHIMSyjfbhBaApzZsTFRDnt%").find(d) != std::string_view::npos;
}

struct TimeFields {
  std::int64_t year = 1970;
  int month = 1, day = 1, hour = 0, minute = 0, second = 0, ms = 0;
  int yday = -1; // %j
  int pm = -1;   // %p: 0 AM, 1 PM
  bool hour12 = false;
  int offset_min = 0; // %z
  bool has_epoch = false;
  std::int64_t epoch_s = 0;
};

class TimeParser {
public:
  TimeParser(std::string_view in) : in_(in) {}

  bool run(std::string_view format, TimeFields& t, int depth = 0) {
    for (std::size_t f = 0; f < format.size(); ++f) {
      char c = format[f];
      if (is_ascii_space(c)) {
        while (p_ < in_.size() && is_ascii_space(in_[p_]))
          ++p_;
        continue;
      }
      if (c != '%') {
        if (p_ >= in_.size() || in_[p_] != c) return false;
        ++p_;
        continue;
      }
      if (++f >= format.size()) return false;
      if (!directive(format[f], t, depth)) return false;
    }
    return depth > 0 || p_ == in_.size();
  }

private:
  bool number(int min_digits, int max_digits, std::int64_t& out) {
    std::size_t start = p_;
    out = 0;
    while (p_ < in_.size() && static_cast<int>(p_ - start) < max_digits && in_[p_] >= '0' &&
           in_[p_] <= '9')
      out = out * 10 + (in_[p_++] - '0');
    return static_cast<int>(p_ - start) >= min_digits;
  }
  bool number(int min_digits, int max_digits, int& out) {
    std::int64_t v;
    if (!number(min_digits, max_digits, v)) return false;
    out = static_cast<int>(v);
    return true;
  }

  bool name(const char* const* names, int count, int& index) {
    std::string_view rest = in_.substr(p_);
    for (int k = 0; k < count; ++k) // full names first: "March" before "Mar"
      if (starts_with_nocase(rest, names[k])) {
        p_ += std::strlen(names[k]);
        index = k;
        return true;
      }
    for (int k = 0; k < count; ++k)
      if (starts_with_nocase(rest, std::string_view(names[k], 3))) {
        p_ += 3;
        index = k;
        return true;
      }
    return false;
  }

  bool offset(TimeFields& t) {
    if (p_ < in_.size() && (in_[p_] == 'Z' || in_[p_] == 'z')) {
      ++p_;
      t.offset_min = 0;
      return true;
    }
    if (p_ >= in_.size() || (in_[p_] != '+' && in_[p_] != '-')) return false;
    int sign = in_[p_++] == '-' ? -1 : 1;
    int hh, mm;
    if (!number(2, 2, hh)) return false;
    if (p_ < in_.size() && in_[p_] == ':') ++p_;
    if (!number(2, 2, mm)) return false;
    if (hh > 23 || mm > 59) return false;
    t.offset_min = sign * (hh * 60 + mm);
    return true;
  }

  bool directive(char d, TimeFields& t, int depth) {
    switch (d) {
    case 'Y': return number(1, 4, t.year);
    case 'm': return number(1, 2, t.month);
    case 'd': return number(1, 2, t.day);
    case 'e':
      if (p_ < in_.size() && in_[p_] == ' ') ++p_;
      return number(1, 2, t.day);
    case 'H': return number(1, 2, t.hour);
    case 'I': t.hour12 = true; return number(1, 2, t.hour);
    case 'M': return number(1, 2, t.minute);
    case 'S': return number(1, 2, t.second);
    case 'y': {
      int yy;
      if (!number(2, 2, yy)) return false;
      t.year = yy < 69 ? 2000 + yy : 1900 + yy; // POSIX: 69-99 are 19xx
      return true;
    }
    case 'j': return number(1, 3, t.yday);
    case 'f': {
      std::size_t start = p_;
      std::int64_t digits;
      if (!number(1, 9, digits)) return false;
      std::size_t n = p_ - start;
      std::int64_t ms = digits;
      for (std::size_t k = n; k < 3; ++k)
        ms *= 10;
      for (std::size_t k = 3; k < n; ++k)
        ms /= 10;
      t.ms = static_cast<int>(ms);
      return true;
    }
    case 'b':
    case 'h':
    case 'B': {
      int m;
      if (!name(month_names, 12, m)) return false;
      t.month = m + 1;
      return true;
    }
    case 'a':
    case 'A': {
      int w;
      return name(weekday_names, 7, w); // read and ignored: the date decides the weekday
    }
    case 'p':
      if (starts_with_nocase(in_.substr(p_), "AM"))
        t.pm = 0;
      else if (starts_with_nocase(in_.substr(p_), "PM"))
        t.pm = 1;
      else
        return false;
      p_ += 2;
      return true;
    case 'z': return offset(t);
    case 'Z':
      for (std::string_view zone : {"UTC", "GMT", "Z"})
        if (starts_with_nocase(in_.substr(p_), zone)) {
          p_ += zone.size();
          return true;
        }
      return false;
    case 's': {
      bool negative = p_ < in_.size() && in_[p_] == '-';
      if (negative) ++p_;
      std::int64_t s;
      if (!number(1, 15, s)) return false;
      t.has_epoch = true;
      t.epoch_s = negative ? -s : s;
      return true;
    }
    case 'T': return depth < 1 && run("%H:%M:%S", t, depth + 1);
    case 'F': return depth < 1 && run("%Y-%m-%d", t, depth + 1);
    case 'R': return depth < 1 && run("%H:%M", t, depth + 1);
    case 'D': return depth < 1 && run("%m/%d/%y", t, depth + 1);
    case 'n':
    case 't':
      while (p_ < in_.size() && is_ascii_space(in_[p_]))
        ++p_;
      return true;
    case '%':
      if (p_ >= in_.size() || in_[p_] != '%') return false;
      ++p_;
      return true;
    default: return false;
    }
  }

  std::string_view in_;
  std::size_t p_ = 0;
};

bool fields_to_ms(TimeFields& t, std::int64_t& ms) {
  if (t.has_epoch) {
    ms = t.epoch_s * 1000 + t.ms;
    return true;
  }
  if (t.hour12) {
    if (t.hour < 1 || t.hour > 12) return false;
    if (t.pm >= 0) t.hour = t.hour % 12 + (t.pm == 1 ? 12 : 0);
  } else if (t.pm == 1 && t.hour < 12) {
    t.hour += 12;
  }
  if (t.year < 0 || t.year > 9999) return false;
  std::int64_t days;
  if (t.yday >= 0) {
    if (t.yday < 1 || t.yday > (is_leap(t.year) ? 366 : 365)) return false;
    days = days_from_civil(t.year, 1, 1) + t.yday - 1;
  } else {
    if (t.month < 1 || t.month > 12) return false;
    if (t.day < 1 ||
        static_cast<unsigned>(t.day) > days_in_month(t.year, static_cast<unsigned>(t.month)))
      return false;
    days = days_from_civil(t.year, static_cast<unsigned>(t.month), static_cast<unsigned>(t.day));
  }
  if (t.hour > 23 || t.minute > 59 || t.second > 60) return false; // 60: a leap second
  ms = days * ms_per_day + ((t.hour * 60LL + t.minute) * 60 + t.second) * 1000 + t.ms -
       t.offset_min * 60'000LL;
  return true;
}

// RFC 3339: 2024-01-02T03:04:05Z, with optional fraction and a numeric offset; 't', 'z' and
// a space separator are accepted too (RFC 3339 §5.6 note).
bool parse_rfc3339(std::string_view s, std::int64_t& ms) {
  TimeFields t;
  std::size_t sep = 10;
  if (s.size() < 20 || (s[sep] != 'T' && s[sep] != 't' && s[sep] != ' ')) return false;
  for (std::size_t k : {4u, 7u})
    if (s[k] != '-') return false;
  for (std::size_t k : {13u, 16u})
    if (s[k] != ':') return false;
  auto digits = [&](std::size_t at, std::size_t n, int& out) {
    out = 0;
    for (std::size_t k = at; k < at + n; ++k) {
      if (s[k] < '0' || s[k] > '9') return false;
      out = out * 10 + (s[k] - '0');
    }
    return true;
  };
  int year;
  if (!digits(0, 4, year) || !digits(5, 2, t.month) || !digits(8, 2, t.day) ||
      !digits(11, 2, t.hour) || !digits(14, 2, t.minute) || !digits(17, 2, t.second))
    return false;
  t.year = year;
  std::string_view rest = s.substr(19);
  std::string_view format = !rest.empty() && rest[0] == '.' ? ".%f%z" : "%z";
  TimeParser tail(rest);
  if (!tail.run(format, t)) return false;
  return fields_to_ms(t, ms);
}

template <typename Sink> void pad(Sink& out, std::int64_t v, int width, char fill = '0') {
  std::array<char, 40> buf;
  std::string_view s = format_int(v, buf);
  for (int k = static_cast<int>(s.size()); k < width; ++k)
    out.put(fill);
  out.put(s);
}

struct CivilTime {
  std::int64_t ms_total;
  std::int64_t year;
  unsigned month, day, yday, weekday;
  int hour, minute, second, ms;
};

CivilTime civil(std::int64_t ms) {
  CivilTime c{};
  c.ms_total = ms;
  std::int64_t days = ms >= 0 ? ms / ms_per_day : -((-ms + ms_per_day - 1) / ms_per_day);
  std::int64_t rem = ms - days * ms_per_day;
  civil_from_days(days, c.year, c.month, c.day);
  c.yday = static_cast<unsigned>(days - days_from_civil(c.year, 1, 1)) + 1;
  c.weekday = static_cast<unsigned>(((days % 7) + 11) % 7); // 1970-01-01 was a Thursday (4)
  c.hour = static_cast<int>(rem / 3'600'000);
  c.minute = static_cast<int>(rem / 60'000 % 60);
  c.second = static_cast<int>(rem / 1000 % 60);
  c.ms = static_cast<int>(rem % 1000);
  return c;
}

template <typename Sink>
void write_time(const CivilTime& c, std::string_view format, Sink& out, int depth = 0) {
  for (std::size_t f = 0; f < format.size(); ++f) {
    if (format[f] != '%' || f + 1 >= format.size()) {
      out.put(format[f]);
      continue;
    }
    switch (format[++f]) {
    case 'Y': pad(out, c.year, 4); break;
    case 'm': pad(out, c.month, 2); break;
    case 'd': pad(out, c.day, 2); break;
    case 'e': pad(out, c.day, 2, ' '); break;
    case 'H': pad(out, c.hour, 2); break;
    case 'I': pad(out, c.hour % 12 == 0 ? 12 : c.hour % 12, 2); break;
    case 'M': pad(out, c.minute, 2); break;
    case 'S': pad(out, c.second, 2); break;
    case 'y': pad(out, c.year % 100, 2); break;
    case 'j': pad(out, c.yday, 3); break;
    case 'f': pad(out, c.ms, 3); break;
    case 'b':
    case 'h': out.put(std::string_view(month_names[c.month - 1], 3)); break;
    case 'B': out.put(month_names[c.month - 1]); break;
    case 'a': out.put(std::string_view(weekday_names[c.weekday], 3)); break;
    case 'A': out.put(weekday_names[c.weekday]); break;
    case 'p': out.put(c.hour < 12 ? "AM" : "PM"); break;
    case 'z': out.put("+0000"); break;
    case 'Z': out.put("UTC"); break;
    case 's': {
      std::int64_t s = c.ms_total >= 0 ? c.ms_total / 1000 : -((-c.ms_total + 999) / 1000);
      pad(out, s, 1);
      break;
    }
    case 'T':
      if (depth == 0) write_time(c, "%H:%M:%S", out, 1);
      break;
    case 'F':
      if (depth == 0) write_time(c, "%Y-%m-%d", out, 1);
      break;
    case 'R':
      if (depth == 0) write_time(c, "%H:%M", out, 1);
      break;
    case 'D':
      if (depth == 0) write_time(c, "%m/%d/%y", out, 1);
      break;
    case 'n': out.put('\n'); break;
    case 't': out.put('\t'); break;
    default: out.put('%'); break; // '%%'; unknown directives were rejected before
    }
  }
}

// ---- regular expressions ----

constexpr std::size_t max_pattern_bytes = 4096;

// std::regex compiles and matches recursively; these limits keep a hostile pattern from
// exhausting the stack or the NFA state budget. Returns an empty string when acceptable.
std::string pattern_problem(std::string_view p) {
  if (p.size() > max_pattern_bytes)
    return "pattern longer than " + std::to_string(max_pattern_bytes) + " bytes";
  int depth = 0;
  bool in_class = false;
  for (std::size_t k = 0; k < p.size(); ++k) {
    char c = p[k];
    if (c == '\\') {
      ++k;
      continue;
    }
    if (in_class) {
      if (c == ']') in_class = false;
      continue;
    }
    if (c == '[')
      in_class = true;
    else if (c == '(' && ++depth > 32)
      return "groups nested more than 32 deep";
    else if (c == ')')
      --depth;
    else if (c == '{') {
      std::int64_t n = 0;
      for (std::size_t m = k + 1; m < p.size() && p[m] != '}'; ++m) {
        if (p[m] >= '0' && p[m] <= '9') {
          n = n * 10 + (p[m] - '0');
          if (n > 1000) return "repetition count above 1000";
        } else {
          n = 0;
        }
      }
    }
  }
  return {};
}

// ECMAScript syntax; __polynomial (a libstdc++ extension) selects the breadth-first matcher,
// whose stack use does not grow with the input, and rejects back-references.
std::regex compile_regex(std::string_view pattern) {
  return std::regex(pattern.begin(), pattern.end(),
                    std::regex::ECMAScript | std::regex_constants::__polynomial);
}

const char* kind_of(const Value& v) {
  return state::kind_name(v.kind);
}

bool make_text(Env& env, std::size_t size, char*& p, Value& out) {
  if (size > std::numeric_limits<std::uint32_t>::max())
    return fail(env, "string result longer than 4 GiB");
  p = allocate(env, size);
  if (p == nullptr) return false;
  out = Value::string(std::string_view(p, size));
  return true;
}

bool to_int_from_double(Env& env, const Node& call, double d, std::int64_t& out) {
  if (!std::isfinite(d) || d < -9223372036854775808.0 || d >= 9223372036854775808.0) {
    std::array<char, 40> buf;
    return fail_in(env, call,
                   std::string(call.fn->name) + ": " + std::string(format_double(d, buf)) +
                       " does not fit in an int");
  }
  out = static_cast<std::int64_t>(d);
  return true;
}

// A leading '+' is accepted (from_chars refuses it) and surrounding spaces are trimmed.
std::string_view number_text(std::string_view s) {
  s = trim_view(s);
  if (s.size() > 1 && s[0] == '+' && s[1] != '-') s.remove_prefix(1);
  return s;
}

bool parse_double(std::string_view s, double& d) {
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), d);
  return ec == std::errc() && ptr == s.data() + s.size();
}

std::string excerpt(std::string_view s) {
  if (s.size() > 64) return "'" + std::string(s.substr(0, 61)) + "...'";
  return "'" + std::string(s) + "'";
}

bool is_nan(const Value& v) {
  return v.kind == Kind::Float && std::isnan(v.f);
}

bool fn_min_max(const Node& call, const Value* args, std::uint32_t n, Env& env, Value& out) {
  bool want_max = call.fn->fn == Fn::Max;
  bool any_float = false;
  std::uint32_t best = 0;
  for (std::uint32_t k = 0; k < n; ++k) {
    const Value& a = args[k];
    const Value& b = args[best];
    if (a.is_number() != b.is_number())
      return fail_in(env, call,
                     std::string("cannot compare ") + kind_of(b) + " with " + kind_of(a));
    if (a.kind == Kind::Float) any_float = true;
    if (k == 0 || is_nan(a)) continue; // NaN never wins
    if (is_nan(b)) {
      best = k;
      continue;
    }
    int c = a.is_number() ? compare_numbers(a, b) : a.str().compare(b.str());
    if ((want_max && c > 0) || (!want_max && c < 0)) best = k;
  }
  out = args[best];
  if (any_float && out.kind == Kind::Int) out = Value::floating(static_cast<double>(out.i));
  return true;
}

bool fn_split(const Node& call, const Value* args, Env& env, Value& out) {
  std::string_view s = args[0].str();
  std::string_view sep = args[1].str();
  if (sep.empty()) return fail_in(env, call, "split: the separator is empty");
  std::size_t count = 1;
  for (std::size_t at = s.find(sep); at != std::string_view::npos;
       at = s.find(sep, at + sep.size()))
    ++count;
  if (env.ctx.arena == nullptr) return allocate(env, 1) != nullptr; // reports the missing arena
  Value* parts = env.ctx.arena->allocate_array<Value>(count);
  std::size_t start = 0;
  for (std::size_t k = 0; k < count; ++k) {
    std::size_t at = k + 1 < count ? s.find(sep, start) : s.size();
    parts[k] = Value::string(s.substr(start, at - start));
    start = at + sep.size();
  }
  out = Value::array_of(parts, static_cast<std::uint32_t>(count));
  return true;
}

bool fn_concat(const Value* args, std::uint32_t n, Env& env, Value& out) {
  CountSink count;
  for (std::uint32_t k = 0; k < n; ++k)
    if (!write_text(args[k], env.names, count, 0))
      return fail(env, "concat: value nested too deeply");
  char* p;
  if (!make_text(env, count.n, p, out)) return false;
  WriteSink write{p};
  for (std::uint32_t k = 0; k < n; ++k)
    write_text(args[k], env.names, write, 0);
  return true;
}

bool fn_regex(const Node& call, const Value* args, Env& env, Value& out) {
  std::string_view s = args[0].str();
  const std::regex* re = call.regex ? &*call.regex : nullptr;
  try {
    if (re == nullptr) {
      std::string_view pattern = args[1].str();
      if (!call.cached_regex || call.cached_pattern != pattern) {
        call.cached_regex.reset();
        std::string problem = pattern_problem(pattern);
        if (!problem.empty())
          return fail_in(env, call, "regex_match: " + problem + ": " + excerpt(pattern));
        call.cached_regex = compile_regex(pattern);
        call.cached_pattern = std::string(pattern);
      }
      re = &*call.cached_regex;
    }
    const char* first = s.empty() ? "" : s.data();
    out = Value::boolean(std::regex_search(first, first + s.size(), *re));
    return true;
  } catch (const std::exception& e) {
    return fail_in(env, call, std::string("regex_match: ") + e.what());
  }
}

} // namespace

const FunctionInfo* find_function(std::string_view name) {
  for (const auto& f : function_table)
    if (f.name == name) return &f;
  return nullptr;
}

std::string closest_function(std::string_view name) {
  std::string_view best;
  std::size_t best_distance = std::numeric_limits<std::size_t>::max();
  for (const auto& f : function_table) {
    std::size_t d = edit_distance(name, f.name);
    // A prefix ("regex" for "regex_match") is as good as a typo.
    if (name.size() >= 3 && f.name.substr(0, name.size()) == name) d = std::min<std::size_t>(d, 1);
    if (d < best_distance) {
      best_distance = d;
      best = f.name;
    }
  }
  std::size_t limit = name.size() <= 3 ? 1 : name.size() <= 6 ? 2 : 3;
  return best_distance <= limit ? std::string(best) : std::string();
}

void prepare_call(Node& call) {
  Fn fn = call.fn->fn;
  if (fn == Fn::RegexMatch && call.args[1]->op == Op::Literal &&
      call.args[1]->literal.kind == Kind::String) {
    std::string_view pattern = call.args[1]->literal.str();
    std::string problem = pattern_problem(pattern);
    if (!problem.empty()) throw ExpressionError(call.args[1]->begin, "regex_match: " + problem);
    try {
      call.regex = compile_regex(pattern);
    } catch (const std::exception& e) {
      throw ExpressionError(call.args[1]->begin,
                            std::string("regex_match: invalid pattern: ") + e.what());
    }
  }
  if ((fn == Fn::ParseTime || fn == Fn::FormatTime) && call.args.size() == 2 &&
      call.args[1]->op == Op::Literal && call.args[1]->literal.kind == Kind::String) {
    std::string error;
    if (check_time_format(call.args[1]->literal.str(), error) >= 0)
      throw ExpressionError(call.args[1]->begin, std::string(call.fn->name) + ": " + error);
  }
}

bool fail(Env& env, std::string message) {
  env.ctx.error = std::move(message);
  return false;
}

char* allocate(Env& env, std::size_t n) {
  if (env.ctx.arena == nullptr) {
    fail(env, "this expression makes strings and needs EvalContext::arena");
    return nullptr;
  }
  return static_cast<char*>(env.ctx.arena->allocate(n == 0 ? 1 : n, 1));
}

bool render(const Value& v, Env& env, Value& out) {
  if (v.kind == Kind::String) {
    out = v;
    return true;
  }
  if (v.kind == Kind::Bool) {
    out = Value::string(v.b ? "true" : "false");
    return true;
  }
  CountSink count;
  if (!write_text(v, env.names, count, 0)) return fail(env, "to_string: value nested too deeply");
  char* p;
  if (!make_text(env, count.n, p, out)) return false;
  WriteSink write{p};
  write_text(v, env.names, write, 0);
  return true;
}

bool hash_value(const Value& v, const state::FieldNames* names, std::uint64_t& out) {
  Fnv h;
  if (!hash_into(h, v, names, 0)) return false;
  out = fmix64(h.h);
  return true;
}

long check_time_format(std::string_view format, std::string& error) {
  for (std::size_t f = 0; f < format.size(); ++f) {
    if (format[f] != '%') continue;
    if (f + 1 >= format.size()) {
      error = "format ends with a lone '%'";
      return static_cast<long>(f);
    }
    char d = format[++f];
    if (!known_directive(d)) {
      error = std::string("unknown directive '%") + d + "' in the time format";
      return static_cast<long>(f - 1);
    }
  }
  return -1;
}

bool parse_time(std::string_view text, std::string_view format, std::int64_t& ms,
                std::string& error) {
  if (format.empty()) {
    if (parse_rfc3339(text, ms)) return true;
    error = excerpt(text) + " is not an RFC 3339 time (like 2024-01-02T03:04:05Z)";
    return false;
  }
  if (check_time_format(format, error) >= 0) return false;
  TimeFields t;
  TimeParser parser(text);
  if (parser.run(format, t) && fields_to_ms(t, ms)) return true;
  error = excerpt(text) + " does not match the time format " + excerpt(format);
  return false;
}

int compare_numbers(const Value& a, const Value& b) {
  auto sign = [](auto x, auto y) { return x < y ? -1 : (x > y ? 1 : 0); };
  if (a.kind == Kind::Int && b.kind == Kind::Int) return sign(a.i, b.i);
  if (a.kind == Kind::Float && b.kind == Kind::Float) {
    if (std::isnan(a.f) || std::isnan(b.f)) return 2;
    return sign(a.f, b.f);
  }
  // An int against a float, exactly: doubles beyond 2^53 cannot hold every int.
  bool flipped = a.kind == Kind::Float;
  std::int64_t i = flipped ? b.i : a.i;
  double d = flipped ? a.f : b.f;
  if (std::isnan(d)) return 2;
  int c;
  if (d >= 9223372036854775808.0)
    c = -1;
  else if (d < -9223372036854775808.0)
    c = 1;
  else {
    double t = std::trunc(d);
    auto ti = static_cast<std::int64_t>(t);
    c = i != ti ? sign(i, ti) : (d > t ? -1 : (d < t ? 1 : 0));
  }
  return flipped ? -c : c;
}

bool equal_values(const Value& a, const Value& b, int depth) {
  if (a.is_number() && b.is_number()) return compare_numbers(a, b) == 0;
  if (a.kind != b.kind || depth > max_value_depth) return false;
  switch (a.kind) {
  case Kind::Null: return true;
  case Kind::Bool: return a.b == b.b;
  case Kind::String: return a.str() == b.str();
  case Kind::Array:
    if (a.size != b.size) return false;
    for (std::uint32_t k = 0; k < a.size; ++k)
      if (!equal_values(a.array[k], b.array[k], depth + 1)) return false;
    return true;
  case Kind::Map:
    if (a.size != b.size) return false;
    for (std::uint32_t k = 0; k < a.size; ++k) {
      const Value* match = nullptr;
      for (std::uint32_t m = 0; m < b.size && match == nullptr; ++m)
        if (b.map[m].name == a.map[k].name) match = &b.map[m].value;
      if (match == nullptr || !equal_values(a.map[k].value, *match, depth + 1)) return false;
    }
    return true;
  default: return false;
  }
}

namespace {
volatile std::uint64_t burn_sink = 0;
} // namespace

void burn_cpu(std::int64_t micros) {
  // The thread's CPU clock, not the wall clock: a test of load handling wants `micros` of
  // work per record, which a wall-clock spin would shorten whenever the thread is preempted.
  auto cpu_ns = [] {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<std::int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
  };
  // Reading that clock is a system call: between reads, about a microsecond of arithmetic,
  // so that the time burnt is mostly the caller's own (user) time, as real work would be.
  const std::int64_t until = cpu_ns() + micros * 1000;
  std::uint64_t x = static_cast<std::uint64_t>(micros);
  while (cpu_ns() < until) {
    for (int k = 0; k < 1024; ++k)
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    burn_sink = x; // kept, so the loop is not optimised away
  }
}

bool call_function(const Node& call, const Value* args, std::uint32_t n, Env& env, Value& out) {
  switch (call.fn->fn) {
  case Fn::If: return fail_in(env, call, "internal: if() reached call_function");
  case Fn::Len: out = Value::integer(args[0].size); return true;
  case Fn::Lower:
  case Fn::Upper: {
    std::string_view s = args[0].str();
    bool upper = call.fn->fn == Fn::Upper;
    char* p;
    if (!make_text(env, s.size(), p, out)) return false;
    for (std::size_t k = 0; k < s.size(); ++k) {
      char c = s[k];
      if (upper && c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
      if (!upper && c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      p[k] = c;
    }
    return true;
  }
  case Fn::Trim: out = Value::string(trim_view(args[0].str())); return true;
  case Fn::Substr: {
    std::string_view s = args[0].str();
    auto size = static_cast<std::int64_t>(s.size());
    std::int64_t start = args[1].i;
    if (start < 0) start = std::max<std::int64_t>(0, size + std::max(start, -size));
    start = std::min(start, size);
    std::int64_t length = size - start;
    if (n == 3) length = std::clamp<std::int64_t>(args[2].i, 0, length);
    out =
        Value::string(s.substr(static_cast<std::size_t>(start), static_cast<std::size_t>(length)));
    return true;
  }
  case Fn::Contains:
    out = Value::boolean(args[0].str().find(args[1].str()) != std::string_view::npos);
    return true;
  case Fn::StartsWith: out = Value::boolean(args[0].str().starts_with(args[1].str())); return true;
  case Fn::EndsWith: out = Value::boolean(args[0].str().ends_with(args[1].str())); return true;
  case Fn::Split: return fn_split(call, args, env, out);
  case Fn::Concat: return fn_concat(args, n, env, out);
  case Fn::ToInt: {
    const Value& v = args[0];
    std::int64_t i = 0;
    switch (v.kind) {
    case Kind::Int: i = v.i; break;
    case Kind::Bool: i = v.b ? 1 : 0; break;
    case Kind::Float:
      if (!to_int_from_double(env, call, v.f, i)) return false;
      break;
    default: {
      std::string_view s = number_text(v.str());
      bool whole = false;
      if (!s.empty()) {
        auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), i);
        whole = ec == std::errc() && ptr == s.data() + s.size();
      }
      if (!whole) {
        double d;
        // "3.0" and "1e3" are numbers too; they convert as a float would.
        if (!parse_double(s, d))
          return fail_in(env, call, "to_int: cannot convert " + excerpt(v.str()) + " to an int");
        if (!to_int_from_double(env, call, std::trunc(d), i)) return false;
      }
    }
    }
    out = Value::integer(i);
    return true;
  }
  case Fn::ToFloat: {
    const Value& v = args[0];
    double d = 0;
    if (v.kind == Kind::Bool)
      d = v.b ? 1 : 0;
    else if (v.is_number())
      d = v.as_double();
    else if (!parse_double(number_text(v.str()), d))
      return fail_in(env, call, "to_float: cannot convert " + excerpt(v.str()) + " to a float");
    out = Value::floating(d);
    return true;
  }
  case Fn::ToString: return render(args[0], env, out);
  case Fn::Abs:
    if (args[0].kind == Kind::Float) {
      out = Value::floating(std::fabs(args[0].f));
      return true;
    }
    if (args[0].i == std::numeric_limits<std::int64_t>::min())
      return fail_in(env, call, "integer overflow");
    out = Value::integer(args[0].i < 0 ? -args[0].i : args[0].i);
    return true;
  case Fn::Floor:
  case Fn::Ceil:
  case Fn::Round: {
    if (args[0].kind == Kind::Int) {
      out = args[0];
      return true;
    }
    double d = args[0].f;
    d = call.fn->fn == Fn::Floor  ? std::floor(d)
        : call.fn->fn == Fn::Ceil ? std::ceil(d)
                                  : std::round(d);
    std::int64_t i;
    if (!to_int_from_double(env, call, d, i)) return false;
    out = Value::integer(i);
    return true;
  }
  case Fn::Min:
  case Fn::Max: return fn_min_max(call, args, n, env, out);
  case Fn::Hash: {
    std::uint64_t h;
    if (!hash_value(args[0], env.names, h))
      return fail_in(env, call, "hash: value nested too deeply");
    out = Value::integer(static_cast<std::int64_t>(h));
    return true;
  }
  case Fn::Now: out = Value::integer(env.ctx.now_ms); return true;
  case Fn::ParseTime: {
    std::int64_t ms;
    std::string error;
    if (!parse_time(args[0].str(), n == 2 ? args[1].str() : std::string_view(), ms, error))
      return fail_in(env, call, "parse_time: " + error);
    out = Value::integer(ms);
    return true;
  }
  case Fn::FormatTime: {
    std::int64_t ms;
    if (args[0].kind == Kind::Float) {
      double d = std::floor(args[0].f);
      if (!(d >= static_cast<double>(min_time_ms) && d <= static_cast<double>(max_time_ms)))
        return fail_in(env, call, "format_time: time out of range (years 0000 to 9999)");
      ms = static_cast<std::int64_t>(d);
    } else {
      ms = args[0].i;
    }
    if (ms < min_time_ms || ms > max_time_ms)
      return fail_in(env, call, "format_time: time out of range (years 0000 to 9999)");
    std::string_view format = n == 2 ? args[1].str() : "%Y-%m-%dT%H:%M:%S.%fZ";
    std::string error;
    if (check_time_format(format, error) >= 0) return fail_in(env, call, "format_time: " + error);
    CivilTime c = civil(ms);
    CountSink count;
    write_time(c, format, count);
    char* p;
    if (!make_text(env, count.n, p, out)) return false;
    WriteSink write{p};
    write_time(c, format, write);
    return true;
  }
  case Fn::RegexMatch: return fn_regex(call, args, env, out);
  case Fn::Burn: {
    std::int64_t micros = args[0].i;
    if (micros < 0 || micros > max_burn_micros)
      return fail_in(env, call,
                     "burn: micros must be from 0 to " + std::to_string(max_burn_micros) +
                         ", got " + std::to_string(micros));
    burn_cpu(micros);
    out = args[0];
    return true;
  }
  }
  return fail_in(env, call, "internal: unknown function " + std::string(call.fn->name));
}

} // namespace streamctl::pipeline::expr
