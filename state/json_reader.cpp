#include "state/json_reader.hpp"

#include "state/json_scan.hpp"
#include "state/utf8.hpp"

#include <bit>
#include <charconv>
#include <cstring>
#include <limits>
#include <system_error>

namespace streamctl::state {

namespace {

constexpr FieldId no_field = std::numeric_limits<FieldId>::max();

bool is_digit(char c) { return static_cast<unsigned char>(c - '0') < 10; }

// The value of 8 decimal digits (leading_digits(w) == 8), the first in the lowest byte: pairs,
// then fours, then the eight, by multiplications that keep each partial value in its own lanes.
std::uint64_t eight_digits_value(std::uint64_t w) {
  w -= 0x3030303030303030ULL;
  w = (w * 10) + (w >> 8); // each 16-bit lane's low byte: two digits
  w = (((w & 0x000000FF000000FFULL) * (100 + (1000000ULL << 32))) +
       (((w >> 16) & 0x000000FF000000FFULL) * (1 + (10000ULL << 32)))) >>
      32;
  return w;
}

// How many of the 8 bytes of w (as read from memory, little-endian) are digits before the
// first that is not (8: all are). Byte by byte, the high nibble of b and that of b + 6 are both
// 3 exactly when b is '0'..'9', provided no byte below carried into b when 6 was added to
// every byte at once; none below the first non-digit can (a digit plus 6 stays below 0x40).
int leading_digits(std::uint64_t w) {
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the byte order of the digits");
  const std::uint64_t t = ((w & 0xF0F0F0F0F0F0F0F0ULL) |
                           (((w + 0x0606060606060606ULL) & 0xF0F0F0F0F0F0F0F0ULL) >> 4)) ^
                          0x3333333333333333ULL;
  return t == 0 ? 8 : std::countr_zero(t) >> 3;
}

// The value of the first n (1 to 7) digits of w: moved to its top bytes, below them '0's.
std::uint64_t leading_digits_value(std::uint64_t w, int n) {
  const int low = (8 - n) * 8;
  return eight_digits_value((w << low) | (0x3030303030303030ULL >> (n * 8)));
}

// Past the run of digits at p: eight bytes at a time while eight are left, then one by one.
const char* skip_digits(const char* p, const char* end) {
  while (end - p >= 8) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    const int n = leading_digits(w);
    p += n;
    if (n < 8) return p;
  }
  while (p < end && is_digit(*p)) ++p;
  return p;
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

const char* skip_space(const char* p, const char* end) {
  while (p < end && is_space(*p)) ++p;
  return p;
}

std::string hex_byte(unsigned char c) {
  static constexpr char digits[] = "0123456789ABCDEF";
  return std::string("0x") + digits[c >> 4] + digits[c & 15];
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Four hex digits at p (the caller checked that they are in bounds), or -1.
int read_hex4(const char* p) {
  int v = 0;
  for (int k = 0; k < 4; ++k) {
    int d = hex_digit(p[k]);
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

char* put_utf8(char* out, std::uint32_t cp) {
  if (cp < 0x80) {
    *out++ = static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out++ = static_cast<char>(0xC0 | (cp >> 6));
    *out++ = static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *out++ = static_cast<char>(0xE0 | (cp >> 12));
    *out++ = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out++ = static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    *out++ = static_cast<char>(0xF0 | (cp >> 18));
    *out++ = static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    *out++ = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out++ = static_cast<char>(0x80 | (cp & 0x3F));
  }
  return out;
}

std::size_t key_slot(std::string_view key) {
  std::size_t n = key.size();
  std::uint32_t h = static_cast<std::uint32_t>(n);
  if (n != 0) {
    h = h * 31 + static_cast<unsigned char>(key[0]);
    h = h * 31 + static_cast<unsigned char>(key[n / 2]);
    h = h * 31 + static_cast<unsigned char>(key[n - 1]);
  }
  return (h ^ (h >> 8)) & 255;
}

std::string what_starts_at(char c) {
  switch (c) {
  case '[': return "an array";
  case '"': return "a string";
  case 't':
  case 'f': return "a boolean";
  case 'n': return "null";
  default: return is_digit(c) || c == '-' ? "a number" : std::string("'") + c + "'";
  }
}

} // namespace

KeptKeys::KeptKeys(const std::vector<bool>& mask, const FieldNames& names, bool left_out) : left_out_(left_out) {
  for (std::size_t id = 0; id < mask.size(); ++id)
    if (mask[id]) entries_.push_back(Entry{names.name(static_cast<FieldId>(id)), static_cast<FieldId>(id)});
}

JsonReader::JsonReader() { key_cache_.fill(no_field); }

bool JsonReader::error(const char* at, std::string_view what) {
  error_.assign(what);
  error_ += " at column ";
  error_ += std::to_string(at - begin_ + 1);
  return false;
}

bool JsonReader::unexpected(const char* at) {
  if (at >= end_) return error(at, "unexpected end of input");
  unsigned char c = static_cast<unsigned char>(*at);
  if (c < 0x20 || c >= 0x7F) {
    char hex[8];
    auto r = std::to_chars(hex, hex + sizeof hex, static_cast<unsigned>(c), 16);
    return error(at, "unexpected byte 0x" + std::string(hex, r.ptr));
  }
  return error(at, std::string("unexpected character '") + static_cast<char>(c) + "'");
}

bool JsonReader::start(std::string_view text, FieldNames& names, Batch& batch) {
  begin_ = text.data();
  end_ = text.data() + text.size();
  p_ = skip_space(begin_, end_);
  names_ = &names;
  batch_ = &batch;
  kept_ = nullptr;
  values_.clear();
  fields_.clear();
  // Value sizes are 32-bit; a longer line cannot be represented.
  if (text.size() > std::numeric_limits<std::uint32_t>::max()) {
    error_ = "line longer than 4 GiB";
    return false;
  }
  return true;
}

Result<void> JsonReader::parse_record(std::string_view text, FieldNames& names, Batch& batch,
                                      RecordBuilder& builder, const KeptKeys* kept) {
  if (!start(text, names, batch)) return fail(error_);
  kept_ = kept;
  if (expected_names_ != &names || expected_kept_ != kept) {
    expected_keys_.clear();
    distinct_expected_stale_ = true;
    expected_names_ = &names;
    expected_kept_ = kept;
  }
  if (p_ == end_) return fail("expected a JSON object, got an empty line");
  if (*p_ != '{') {
    if (*p_ == '[' || *p_ == '"' || *p_ == 't' || *p_ == 'f' || *p_ == 'n' || *p_ == '-' ||
        is_digit(*p_))
      return fail("expected a JSON object, got " + what_starts_at(*p_));
    unexpected(p_);
    return fail("expected a JSON object: " + error_);
  }
  if (!object(builder.mutable_fields(), 1)) return fail(error_);
  p_ = skip_space(p_, end_);
  if (p_ != end_) {
    error(p_, "trailing characters");
    return fail(error_);
  }
  return {};
}

Result<Value> JsonReader::parse_value(std::string_view text, FieldNames& names, Batch& batch) {
  if (!start(text, names, batch)) return fail(error_);
  if (p_ == end_) return fail("expected a JSON value, got an empty line");
  Value v;
  if (!value(v, 0)) return fail(error_);
  p_ = skip_space(p_, end_);
  if (p_ != end_) {
    error(p_, "trailing characters");
    return fail(error_);
  }
  return v;
}

// Parses the value at p_ (not whitespace); leaves p_ just after it.
bool JsonReader::value(Value& out, int depth) {
  if (p_ >= end_) return unexpected(p_);
  switch (*p_) {
  case '"': return string_value(out);
  case '{': {
    if (depth >= max_depth) return error(p_, "nesting deeper than 128 levels");
    std::size_t base = fields_.size();
    if (!object(fields_, depth + 1)) return false;
    auto n = static_cast<std::uint32_t>(fields_.size() - base);
    Field* copy = nullptr;
    if (n != 0) {
      copy = batch_->arena().allocate_array<Field>(n);
      std::memcpy(static_cast<void*>(copy), fields_.data() + base, n * sizeof(Field));
    }
    fields_.resize(base);
    out = Value::map_of(copy, n);
    return true;
  }
  case '[':
    if (depth >= max_depth) return error(p_, "nesting deeper than 128 levels");
    return array(out, depth + 1);
  case 't': return literal("true", Value::boolean(true), out);
  case 'f': return literal("false", Value::boolean(false), out);
  case 'n': return literal("null", Value::null(), out);
  default:
    if (*p_ == '-' || is_digit(*p_)) return number(out);
    return unexpected(p_);
  }
}

bool JsonReader::literal(std::string_view word, Value v, Value& out) {
  if (static_cast<std::size_t>(end_ - p_) < word.size() ||
      std::memcmp(p_, word.data(), word.size()) != 0)
    return unexpected(p_);
  p_ += word.size();
  out = v;
  return true;
}

// p_ is at '{'. Appends the members to `out` (from its current size) and removes duplicates.
bool JsonReader::object(std::vector<Field>& out, int depth) {
  std::size_t base = out.size();
  ++p_;
  p_ = skip_space(p_, end_);
  if (p_ < end_ && *p_ == '}') {
    ++p_;
    return true;
  }
  // Only the record's own fields are projected (depth 1 is the top level of parse_record).
  const bool top = depth == 1;
  const KeptKeys* kept = top ? kept_ : nullptr;
  const bool predict = top && repeated_keys_;
  bool all_predicted = predict;
  std::size_t keys = 0;
  for (std::size_t position = 0;; ++position) {
    keys = position + 1;
    if (p_ >= end_ || *p_ != '"') {
      if (p_ >= end_) return unexpected(p_);
      return error(p_, "expected a string key");
    }
    FieldId name = no_field;
    bool known = false;
    if (predict && position < expected_keys_.size()) {
      // The same bytes as a key that passed every check, then its closing quote: that key.
      const ExpectedKey& e = expected_keys_[position];
      std::size_t n = e.raw.size();
      if (static_cast<std::size_t>(end_ - p_) > n + 1 && p_[n + 1] == '"' &&
          equal_short(p_ + 1, e.raw.data(), n)) {
        name = e.id;
        p_ += n + 2;
        known = true;
      }
    }
    if (!known) {
      all_predicted = false;
      std::string_view text;
      if (!key_text(text)) return false;
      if (kept == nullptr) {
        name = intern(text);
      } else if (auto id = kept->find(text)) {
        if (!kept->lists_left_out()) name = *id;
      } else if (kept->lists_left_out()) {
        name = intern(text);
      }
      // Remember a key without escapes (its text is in the line) for the next line.
      if (predict && text.data() > begin_ && text.data() < end_) {
        if (expected_keys_.size() <= position) expected_keys_.resize(position + 1);
        expected_keys_[position].raw.assign(text);
        expected_keys_[position].id = name;
        distinct_expected_stale_ = true;
      }
    }
    if (p_ < end_ && *p_ == ':') {
      ++p_;
    } else {
      p_ = skip_space(p_, end_);
      if (p_ >= end_ || *p_ != ':') return error(p_, "expected ':'");
      ++p_;
    }
    p_ = skip_space(p_, end_);
    if (name == no_field) {
      if (!skip_value(depth)) return false;
    } else if (p_ < end_ && *p_ != '{' && *p_ != '[') {
      // A scalar is parsed into its slot: a Value built on the stack and then copied as 16
      // bytes stalled on store forwarding (a third of this function's time in perf). Nested
      // values append to fields_ and values_, which may be `out`, so they are copied.
      out.push_back(Field{name, Value()});
      if (!value(out.back().value, depth)) return false;
    } else {
      Value v;
      if (!value(v, depth)) return false;
      out.push_back(Field{name, v});
    }
    if (p_ < end_ && *p_ == ',') {
      ++p_;
    } else if (p_ < end_ && *p_ == '}') {
      ++p_;
      break;
    } else {
      p_ = skip_space(p_, end_);
      if (p_ < end_ && *p_ == ',') {
        ++p_;
      } else if (p_ < end_ && *p_ == '}') {
        ++p_;
        break;
      } else {
        return error(p_, "expected ',' or '}'");
      }
    }
    p_ = skip_space(p_, end_);
  }
  // Each field's id is then its expected key's, in the same order.
  const bool distinct = all_predicted && keys <= distinct_expected_keys();
  if (out.size() - base > 1 && !distinct) dedup(out, base);
  return true;
}

std::size_t JsonReader::distinct_expected_keys() {
  if (distinct_expected_stale_) {
    // Quadratic, but only when the expected keys change; a wide record's later keys are left
    // to dedup().
    constexpr std::size_t most = 64;
    std::size_t m = 0;
    for (; m < expected_keys_.size() && m < most; ++m) {
      const FieldId id = expected_keys_[m].id;
      if (id == no_field) continue;
      bool repeated = false;
      for (std::size_t k = 0; k < m && !repeated; ++k) repeated = expected_keys_[k].id == id;
      if (repeated) break;
    }
    distinct_expected_ = m;
    distinct_expected_stale_ = false;
  }
  return distinct_expected_;
}

// p_ is at '['.
bool JsonReader::array(Value& out, int depth) {
  std::size_t base = values_.size();
  ++p_;
  p_ = skip_space(p_, end_);
  if (p_ < end_ && *p_ == ']') {
    ++p_;
    out = Value::array_of(nullptr, 0);
    return true;
  }
  for (;;) {
    Value v;
    if (!value(v, depth)) return false;
    values_.push_back(v);
    p_ = skip_space(p_, end_);
    if (p_ < end_ && *p_ == ',') {
      ++p_;
      p_ = skip_space(p_, end_);
    } else if (p_ < end_ && *p_ == ']') {
      ++p_;
      break;
    } else {
      return error(p_, "expected ',' or ']'");
    }
  }
  auto n = static_cast<std::uint32_t>(values_.size() - base);
  Value* copy = batch_->arena().allocate_array<Value>(n);
  std::memcpy(static_cast<void*>(copy), values_.data() + base, n * sizeof(Value));
  values_.resize(base);
  out = Value::array_of(copy, n);
  return true;
}

// From `p`, where find_json_special stopped (or end_): the first '"' or '\\' from there on
// inside a string, or end_; nullptr (with the error set) at a raw control character or at bytes
// that are not UTF-8, which RFC 8259 does not allow in a string. Callers take the common case
// (a quote or backslash) themselves, so ASCII text costs what the quote search alone cost; only
// non-ASCII bytes are decoded, a run of them at a time.
const char* JsonReader::scan_string(const char* p) {
  for (;;) {
    if (p >= end_ || *p == '"' || *p == '\\') return p;
    auto c = static_cast<unsigned char>(*p);
    if (c < 0x20) {
      error(p, "raw control character " + hex_byte(c) + " in a string (it must be escaped)");
      return nullptr;
    }
    while (p < end_ && static_cast<unsigned char>(*p) >= 0x80) {
      std::size_t n = utf8_sequence_length(p, end_);
      if (n == 0) {
        error(p, invalid_utf8_reason(static_cast<unsigned char>(*p)));
        return nullptr;
      }
      p += n;
    }
    p = find_json_special(p, end_);
  }
}

// p_ is at the opening quote.
bool JsonReader::string_value(Value& out) {
  const char* open = p_;
  const char* q = find_json_special(open + 1, end_);
  // Plain when the first byte the scan stops at is the closing quote: the writer then copies
  // the text without scanning it again.
  const bool plain = q < end_ && *q == '"';
  if (q < end_ && *q != '"' && *q != '\\' && (q = scan_string(q)) == nullptr) return false;
  if (q >= end_) return error(open, "unterminated string");
  if (*q == '"') {
    const std::string_view text(open + 1, static_cast<std::size_t>(q - open - 1));
    out = plain ? Value::plain_string(text) : Value::string(text);
    p_ = q + 1;
    return true;
  }
  std::string_view decoded;
  if (!decode_escaped(open, q, decoded, true)) return false;
  out = Value::string(decoded);
  return true;
}

// The key at p_ (its opening quote), decoded when it has escapes (into key_buffer_, valid until
// the next key); leaves p_ after its closing quote.
bool JsonReader::key_text(std::string_view& out) {
  const char* open = p_;
  const char* q = find_json_special(open + 1, end_);
  if (q < end_ && *q != '"' && *q != '\\' && (q = scan_string(q)) == nullptr) return false;
  if (q >= end_) return error(open, "unterminated string");
  if (*q == '"') {
    out = std::string_view(open + 1, static_cast<std::size_t>(q - open - 1));
    p_ = q + 1;
    return true;
  }
  return decode_escaped(open, q, out, false);
}

bool JsonReader::key(FieldId& out) {
  std::string_view text;
  if (!key_text(text)) return false;
  out = intern(text);
  return true;
}

// The closing quote of the string that opens at `open` and has a backslash at `first_escape`,
// or nullptr (with the error set). Checks the bytes (UTF-8, no raw control characters) up to it.
const char* JsonReader::string_close(const char* open, const char* first_escape) {
  const char* close = first_escape;
  for (;;) {
    if (close >= end_) {
      error(open, "unterminated string");
      return nullptr;
    }
    if (*close == '"') return close;
    // A backslash: skip it and the character it escapes.
    if (end_ - close <= 2) {
      error(open, "unterminated string");
      return nullptr;
    }
    close = scan_string(find_json_special(close + 2, end_));
    if (close == nullptr) return nullptr;
  }
}

// Decodes the string that opens at `open` and has its first backslash at `first_escape`, into
// the arena or into key_buffer_. Leaves p_ after the closing quote.
bool JsonReader::decode_escaped(const char* open, const char* first_escape, std::string_view& out,
                                bool into_arena) {
  // Find the closing quote first: the decoded text is never longer than the raw text, so the
  // raw length bounds the space to reserve.
  const char* close = string_close(open, first_escape);
  if (close == nullptr) return false;
  auto raw = static_cast<std::size_t>(close - open - 1);
  char* dst;
  if (into_arena) {
    dst = static_cast<char*>(batch_->arena().allocate(raw, 1));
  } else {
    key_buffer_.resize(raw);
    dst = key_buffer_.data();
  }
  char* w = dst;
  const char* s = open + 1;
  while (s < close) {
    const char* e = s;
    while (e < close && *e != '\\') ++e;
    std::memcpy(w, s, static_cast<std::size_t>(e - s));
    w += e - s;
    if (e >= close) break;
    // e is at a backslash; close is past the escape character, so e + 1 < close.
    char c = e[1];
    switch (c) {
    case '"': *w++ = '"'; break;
    case '\\': *w++ = '\\'; break;
    case '/': *w++ = '/'; break;
    case 'b': *w++ = '\b'; break;
    case 'f': *w++ = '\f'; break;
    case 'n': *w++ = '\n'; break;
    case 'r': *w++ = '\r'; break;
    case 't': *w++ = '\t'; break;
    case 'u': {
      if (close - e < 6) return error(e, "invalid \\u escape");
      int unit = read_hex4(e + 2);
      if (unit < 0) return error(e, "invalid \\u escape");
      auto cp = static_cast<std::uint32_t>(unit);
      if (cp >= 0xD800 && cp <= 0xDBFF && close - e >= 12 && e[6] == '\\' && e[7] == 'u') {
        int low = read_hex4(e + 8);
        if (low >= 0xDC00 && low <= 0xDFFF) {
          cp = 0x10000 + ((cp - 0xD800) << 10) + (static_cast<std::uint32_t>(low) - 0xDC00);
          e += 6;
        }
      }
      if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD; // a lone surrogate
      w = put_utf8(w, cp);
      s = e + 6;
      continue;
    }
    default: return error(e, std::string("invalid escape '\\") + c + "'");
    }
    s = e + 2;
  }
  out = std::string_view(dst, static_cast<std::size_t>(w - dst));
  p_ = close + 1;
  return true;
}

FieldId JsonReader::intern(std::string_view key) {
  FieldId& cached = key_cache_[key_slot(key)];
  // The cache is only a hint: it is checked against this FieldNames, so a reader may serve
  // several FieldNames (one per task) without mixing their ids.
  if (cached < names_->size() && names_->name(cached) == key) return cached;
  cached = names_->intern(key);
  return cached;
}

// Removes duplicate keys among fields[base..]: the last value wins, at the first position.
void JsonReader::dedup(std::vector<Field>& fields, std::size_t base) {
  std::size_t n = fields.size() - base;
  Field* f = fields.data() + base;
  if (n <= 16) {
    bool duplicate = false;
    for (std::size_t k = 1; k < n && !duplicate; ++k)
      for (std::size_t m = 0; m < k; ++m)
        if (f[m].name == f[k].name) {
          duplicate = true;
          break;
        }
    if (!duplicate) return;
    std::size_t kept = 0;
    for (std::size_t k = 0; k < n; ++k) {
      std::size_t m = 0;
      while (m < kept && f[m].name != f[k].name) ++m;
      if (m < kept)
        f[m].value = f[k].value;
      else
        f[kept++] = f[k];
    }
    fields.resize(base + kept);
    return;
  }
  // Big objects: a table by FieldId, stamped with a generation so that it needs no clearing.
  if (++generation_ == 0) {
    std::fill(seen_generation_.begin(), seen_generation_.end(), 0);
    generation_ = 1;
  }
  if (seen_generation_.size() < names_->size()) {
    seen_generation_.resize(names_->size(), 0);
    seen_position_.resize(names_->size(), 0);
  }
  std::size_t kept = 0;
  for (std::size_t k = 0; k < n; ++k) {
    FieldId id = f[k].name;
    if (seen_generation_[id] == generation_) {
      f[seen_position_[id]].value = f[k].value;
    } else {
      seen_generation_[id] = generation_;
      seen_position_[id] = static_cast<std::uint32_t>(kept);
      f[kept++] = f[k];
    }
  }
  fields.resize(base + kept);
}

// Numbers follow the JSON grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
bool JsonReader::number(Value& out) {
  const char* start = p_;
  const char* p = p_;
  bool negative = false;
  if (*p == '-') {
    negative = true;
    ++p;
  }
  if (p >= end_ || !is_digit(*p)) return error(start, "invalid number");
  const char* digits = p;
  std::uint64_t magnitude = 0;
  if (*p == '0') {
    ++p;
    if (p < end_ && is_digit(*p)) return error(start, "invalid number (leading zero)");
  } else {
    // Wraps past 19 digits; such a literal takes the float path below. Eight bytes at a time
    // while eight are left, the run's last few digits from the same eight (a status or a price
    // has 3 or 4: one by one they cost more than the eight); the wrap is the same, being
    // modulo 2^64.
    static constexpr std::uint64_t powers_of_ten[8] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000};
    while (end_ - p >= 8) {
      std::uint64_t w;
      std::memcpy(&w, p, 8);
      const int n = leading_digits(w);
      if (n == 8) {
        magnitude = magnitude * 100000000 + eight_digits_value(w);
        p += 8;
        continue;
      }
      if (n > 0) magnitude = magnitude * powers_of_ten[n] + leading_digits_value(w, n);
      p += n;
      break;
    }
    while (p < end_ && is_digit(*p)) magnitude = magnitude * 10 + static_cast<unsigned>(*p++ - '0');
  }
  auto int_digits = static_cast<std::size_t>(p - digits);
  bool is_float = false;
  if (p < end_ && *p == '.') {
    is_float = true;
    ++p;
    if (p >= end_ || !is_digit(*p)) return error(start, "invalid number");
    while (p < end_ && is_digit(*p)) ++p;
  }
  if (p < end_ && (*p == 'e' || *p == 'E')) {
    is_float = true;
    ++p;
    if (p < end_ && (*p == '+' || *p == '-')) ++p;
    if (p >= end_ || !is_digit(*p)) return error(start, "invalid number");
    while (p < end_ && is_digit(*p)) ++p;
  }
  if (!is_float && int_digits <= 19) {
    constexpr auto max = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    if (!negative && magnitude <= max) {
      out = Value::integer(static_cast<std::int64_t>(magnitude));
      p_ = p;
      return true;
    }
    if (negative && magnitude <= max + 1) {
      out = Value::integer(static_cast<std::int64_t>(0 - magnitude)); // two's complement
      p_ = p;
      return true;
    }
  }
  double d = 0;
  auto [ptr, ec] = std::from_chars(start, p, d);
  if (ec == std::errc::result_out_of_range) {
    // Underflow reads as zero; overflow is an error rather than a silent infinity. The decimal
    // magnitude tells them apart: digits before the point (or minus the zeros after "0.") plus
    // the exponent.
    long magnitude10 = 0;
    const char* q = digits;
    if (*q == '0') {
      ++q;
      if (q < p && *q == '.') {
        ++q;
        while (q < p && *q == '0') {
          --magnitude10;
          ++q;
        }
      }
    } else {
      magnitude10 = static_cast<long>(int_digits);
    }
    const char* e = start;
    while (e < p && *e != 'e' && *e != 'E') ++e;
    if (e < p) {
      long exponent = 0;
      bool exp_negative = false;
      ++e;
      if (*e == '+' || *e == '-') exp_negative = *e++ == '-';
      while (e < p && exponent < 100000) exponent = exponent * 10 + (*e++ - '0');
      magnitude10 += exp_negative ? -exponent : exponent;
    }
    if (magnitude10 > 0) return error(start, "number out of range");
    d = negative ? -0.0 : 0.0;
  } else if (ec != std::errc() || ptr != p) {
    return error(start, "invalid number");
  }
  out = Value::floating(d);
  p_ = p;
  return true;
}

// The skip functions below mirror value(), object(), array(), string_value() and number() check
// for check, so that a skipped value fails where and as a built one would (the dead-letter
// content of a bad line does not depend on which fields are read); they build nothing.

bool JsonReader::skip_value(int depth) {
  if (p_ >= end_) return unexpected(p_);
  switch (*p_) {
  case '"': return skip_string();
  case '{':
    if (depth >= max_depth) return error(p_, "nesting deeper than 128 levels");
    return skip_object(depth + 1);
  case '[':
    if (depth >= max_depth) return error(p_, "nesting deeper than 128 levels");
    return skip_array(depth + 1);
  case 't': return skip_literal("true");
  case 'f': return skip_literal("false");
  case 'n': return skip_literal("null");
  default:
    if (*p_ == '-' || is_digit(*p_)) return skip_number();
    return unexpected(p_);
  }
}

bool JsonReader::skip_literal(std::string_view word) {
  if (static_cast<std::size_t>(end_ - p_) < word.size() ||
      std::memcmp(p_, word.data(), word.size()) != 0)
    return unexpected(p_);
  p_ += word.size();
  return true;
}

// p_ is at '{'.
bool JsonReader::skip_object(int depth) {
  ++p_;
  p_ = skip_space(p_, end_);
  if (p_ < end_ && *p_ == '}') {
    ++p_;
    return true;
  }
  for (;;) {
    if (p_ >= end_ || *p_ != '"') {
      if (p_ >= end_) return unexpected(p_);
      return error(p_, "expected a string key");
    }
    if (!skip_string()) return false;
    p_ = skip_space(p_, end_);
    if (p_ >= end_ || *p_ != ':') return error(p_, "expected ':'");
    ++p_;
    p_ = skip_space(p_, end_);
    if (!skip_value(depth)) return false;
    p_ = skip_space(p_, end_);
    if (p_ < end_ && *p_ == ',') {
      ++p_;
    } else if (p_ < end_ && *p_ == '}') {
      ++p_;
      return true;
    } else {
      return error(p_, "expected ',' or '}'");
    }
    p_ = skip_space(p_, end_);
  }
}

// p_ is at '['.
bool JsonReader::skip_array(int depth) {
  ++p_;
  p_ = skip_space(p_, end_);
  if (p_ < end_ && *p_ == ']') {
    ++p_;
    return true;
  }
  for (;;) {
    if (!skip_value(depth)) return false;
    p_ = skip_space(p_, end_);
    if (p_ < end_ && *p_ == ',') {
      ++p_;
      p_ = skip_space(p_, end_);
    } else if (p_ < end_ && *p_ == ']') {
      ++p_;
      return true;
    } else {
      return error(p_, "expected ',' or ']'");
    }
  }
}

// p_ is at the opening quote.
bool JsonReader::skip_string() {
  const char* open = p_;
  const char* q = find_json_special(open + 1, end_);
  if (q < end_ && *q != '"' && *q != '\\' && (q = scan_string(q)) == nullptr) return false;
  if (q >= end_) return error(open, "unterminated string");
  if (*q == '\\') {
    q = string_close(open, q);
    if (q == nullptr || !check_escapes(open, q)) return false;
  }
  p_ = q + 1;
  return true;
}

// The escapes of the string from `open` to `close`, checked as decode_escaped decodes them.
bool JsonReader::check_escapes(const char* open, const char* close) {
  const char* e = open + 1;
  for (;;) {
    e = static_cast<const char*>(std::memchr(e, '\\', static_cast<std::size_t>(close - e)));
    if (e == nullptr) return true;
    // close is past the escape character, so e + 1 < close.
    switch (e[1]) {
    case '"':
    case '\\':
    case '/':
    case 'b':
    case 'f':
    case 'n':
    case 'r':
    case 't': e += 2; break;
    case 'u': {
      if (close - e < 6) return error(e, "invalid \\u escape");
      int unit = read_hex4(e + 2);
      if (unit < 0) return error(e, "invalid \\u escape");
      if (unit >= 0xD800 && unit <= 0xDBFF && close - e >= 12 && e[6] == '\\' && e[7] == 'u') {
        int low = read_hex4(e + 8);
        if (low >= 0xDC00 && low <= 0xDFFF) e += 6; // a surrogate pair: its second half is valid
      }
      e += 6;
      break;
    }
    default: return error(e, std::string("invalid escape '\\") + e[1] + "'");
    }
  }
}

// The grammar of number(); only a number whose double could overflow (an exponent, or more
// than 300 digits before the point) is converted, by number() itself, to check its range.
bool JsonReader::skip_number() {
  const char* start = p_;
  const char* p = p_;
  if (*p == '-') ++p;
  if (p >= end_ || !is_digit(*p)) return error(start, "invalid number");
  const char* digits = p;
  if (*p == '0') {
    ++p;
    if (p < end_ && is_digit(*p)) return error(start, "invalid number (leading zero)");
  } else {
    p = skip_digits(p, end_);
  }
  bool exact = p - digits <= 300;
  if (p < end_ && *p == '.') {
    ++p;
    if (p >= end_ || !is_digit(*p)) return error(start, "invalid number");
    p = skip_digits(p, end_);
  }
  if (p < end_ && (*p == 'e' || *p == 'E')) exact = false;
  if (!exact) {
    Value unused;
    return number(unused);
  }
  p_ = p;
  return true;
}

Result<void> parse_json_record(std::string_view text, FieldNames& names, Batch& batch,
                               RecordBuilder& builder) {
  thread_local JsonReader reader;
  return reader.parse_record(text, names, batch, builder);
}

Result<Value> parse_json_value(std::string_view text, FieldNames& names, Batch& batch) {
  thread_local JsonReader reader;
  return reader.parse_value(text, names, batch);
}

} // namespace streamctl::state
