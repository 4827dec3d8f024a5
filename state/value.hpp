#pragma once
// A value of a record field (SPEC §4): null, bool, int, float, string, array or map.
//
// Value is 16 bytes and trivially copyable. Strings, arrays and maps do not own their
// contents: they point into memory that the enclosing Batch keeps alive (its arena, or an
// input buffer it retains). Copying a Value between batches therefore requires the target
// batch to retain the source's memory (Batch::retain) or to deep-copy (Batch::copy_value).

#include <cassert>
#include <cstdint>
#include <string_view>

#include "state/field_names.hpp"

namespace streamctl::state {

enum class Kind : std::uint8_t { Null, Bool, Int, Float, String, Array, Map };

const char* kind_name(Kind kind);

struct Field;

struct Value {
  // flags: a property of a string's bytes that whoever made them knew, so that later readers
  // need not scan for it again. Copies keep it; a new string starts without it.
  static constexpr std::uint8_t json_plain = 1; // no byte that JSON text escapes or checks

  Kind kind = Kind::Null;
  std::uint8_t flags = 0; // in the padding before size: Value stays 16 bytes
  std::uint32_t size = 0; // bytes of a string, elements of an array or map
  union {
    bool b;
    std::int64_t i;
    double f;
    const char* s;
    const Value* array;
    const Field* map;
  };

  Value() : i(0) {}
  static Value null() { return Value(); }
  static Value boolean(bool v) {
    Value x;
    x.kind = Kind::Bool;
    x.b = v;
    return x;
  }
  static Value integer(std::int64_t v) {
    Value x;
    x.kind = Kind::Int;
    x.i = v;
    return x;
  }
  static Value floating(double v) {
    Value x;
    x.kind = Kind::Float;
    x.f = v;
    return x;
  }
  // `text` must outlive the value (see the note at the top of this file).
  static Value string(std::string_view text) {
    Value x;
    x.kind = Kind::String;
    x.size = static_cast<std::uint32_t>(text.size());
    x.s = text.data();
    return x;
  }
  // A string whose bytes are all printable ASCII other than '"' and '\\' (0x20..0x7F): a
  // JSON writer copies it as it is, without the scan for bytes to escape (find_json_special).
  // For text its maker produced or already scanned (the JSON reader, the generators).
  static Value plain_string(std::string_view text) {
    assert(is_plain_text(text) && "plain_string of text with a byte to escape");
    Value x = string(text);
    x.flags = json_plain;
    return x;
  }
  static bool is_plain_text(std::string_view text) {
    for (char c : text) {
      auto u = static_cast<unsigned char>(c);
      if (u < 0x20 || u >= 0x80 || c == '"' || c == '\\') return false;
    }
    return true;
  }
  static Value array_of(const Value* elements, std::uint32_t n) {
    Value x;
    x.kind = Kind::Array;
    x.size = n;
    x.array = elements;
    return x;
  }
  static Value map_of(const Field* fields, std::uint32_t n) {
    Value x;
    x.kind = Kind::Map;
    x.size = n;
    x.map = fields;
    return x;
  }

  bool is_null() const { return kind == Kind::Null; }
  bool is_number() const { return kind == Kind::Int || kind == Kind::Float; }
  bool is_json_plain() const { return (flags & json_plain) != 0; }
  std::string_view str() const { return {s, size}; }
  double as_double() const { return kind == Kind::Int ? static_cast<double>(i) : f; }
};

struct Field {
  FieldId name;
  Value value;
};

static_assert(sizeof(Value) == 16);

// Deep equality; an int and a float are equal when they denote the same number.
bool values_equal(const Value& a, const Value& b);

} // namespace streamctl::state
