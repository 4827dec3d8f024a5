#pragma once
// A value of a record field (SPEC §4): null, bool, int, float, string, array or map.
//
// Value is 16 bytes and trivially copyable. Strings, arrays and maps do not own their
// contents: they point into memory that the enclosing Batch keeps alive (its arena, or an
// input buffer it retains). Copying a Value between batches therefore requires the target
// batch to retain the source's memory (Batch::retain) or to deep-copy (Batch::copy_value).

#include <cstdint>
#include <string_view>

#include "state/field_names.hpp"

namespace streamctl::state {

enum class Kind : std::uint8_t { Null, Bool, Int, Float, String, Array, Map };

const char* kind_name(Kind kind);

struct Field;

struct Value {
  Kind kind = Kind::Null;
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
