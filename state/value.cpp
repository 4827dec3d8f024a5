#include "state/value.hpp"

namespace streamctl::state {

const char* kind_name(Kind kind) {
  switch (kind) {
  case Kind::Null: return "null";
  case Kind::Bool: return "bool";
  case Kind::Int: return "int";
  case Kind::Float: return "float";
  case Kind::String: return "string";
  case Kind::Array: return "array";
  case Kind::Map: return "map";
  }
  return "?";
}

bool values_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind == Kind::Int && b.kind == Kind::Int) return a.i == b.i;
    return a.as_double() == b.as_double();
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
  case Kind::Null: return true;
  case Kind::Bool: return a.b == b.b;
  case Kind::String: return a.str() == b.str();
  case Kind::Array:
    if (a.size != b.size) return false;
    for (std::uint32_t k = 0; k < a.size; ++k)
      if (!values_equal(a.array[k], b.array[k])) return false;
    return true;
  case Kind::Map:
    // Field ids are compared, so both maps must come from the same FieldNames.
    if (a.size != b.size) return false;
    for (std::uint32_t k = 0; k < a.size; ++k) {
      bool found = false;
      for (std::uint32_t m = 0; m < b.size; ++m) {
        if (a.map[k].name == b.map[m].name) {
          if (!values_equal(a.map[k].value, b.map[m].value)) return false;
          found = true;
          break;
        }
      }
      if (!found) return false;
    }
    return true;
  default: return false;
  }
}

} // namespace streamctl::state
