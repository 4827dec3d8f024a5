#include "operators/text_format_schema.hpp"

namespace streamctl::operators {

using pipeline::KeySchema;
using pipeline::KeyType;

std::vector<KeySchema> text_format_keys() {
  return {
      KeySchema{"format", KeyType::Enum, false, {"json", "csv", "lines"}, {}, "record format"},
      KeySchema{"columns", KeyType::StringArray, false, {}, {}, "csv column names"},
      KeySchema{"types", KeyType::StringMap, false, {}, {}, "csv column types: int, float, bool, string"},
      KeySchema{"delimiter", KeyType::String, false, {}, {}, "csv delimiter (one character)"},
      KeySchema{"header", KeyType::Bool, false, {}, {}, "csv: the first line is a header"},
  };
}

} // namespace streamctl::operators
