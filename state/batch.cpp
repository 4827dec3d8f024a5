#include "state/batch.hpp"

namespace streamctl::state {

void Batch::retain_memory_of(const Batch& other) {
  if (&other == this) return;
  retained_.push_back(other.arena_);
  retained_.insert(retained_.end(), other.retained_.begin(), other.retained_.end());
}

Value Batch::copy_value(const Value& v) {
  switch (v.kind) {
  case Kind::String: {
    Value copy = Value::string(arena_->copy(v.str()));
    copy.flags = v.flags; // the same bytes
    return copy;
  }
  case Kind::Array: {
    Value* elements = arena_->allocate_array<Value>(v.size);
    for (std::uint32_t k = 0; k < v.size; ++k) elements[k] = copy_value(v.array[k]);
    return Value::array_of(elements, v.size);
  }
  case Kind::Map: {
    Field* fields = arena_->allocate_array<Field>(v.size);
    for (std::uint32_t k = 0; k < v.size; ++k)
      fields[k] = Field{v.map[k].name, copy_value(v.map[k].value)};
    return Value::map_of(fields, v.size);
  }
  default: return v;
  }
}

} // namespace streamctl::state
