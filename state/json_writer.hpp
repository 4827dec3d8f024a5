#pragma once
// Writing values as JSON text: the `json` format of sinks (SPEC §4), and the canonical form that
// `streamctl test` uses to compare outputs as multisets of JSON values.
//
// Output is compact (no spaces), strings are escaped per RFC 8259 ('"', '\\', and control
// characters; \b \f \n \r \t by name, the others as \u00XX), and the output is always UTF-8:
// valid UTF-8 passes through, and each byte that is not part of a valid UTF-8 sequence is
// written as U+FFFD. Sources refuse such bytes (SPEC §4), so only a string an operator built by
// bytes (substr in the middle of a character, say) can hold them. Floats use the shortest text that reads back to the same double; a float with an
// integral value keeps a ".0" (2.0 prints "2.0", so it reads back as a float); NaN and
// infinities print as null. Functions append to `out` and allocate nothing else.

#include <cstdint>
#include <string>
#include <vector>

#include "state/batch.hpp"
#include "state/field_names.hpp"
#include "state/value.hpp"

namespace streamctl::state {

// One object, fields in record order, no newline: {"a":1,"b":"x"}.
void append_json(const Record& r, const FieldNames& names, std::string& out);
void append_json_value(const Value& v, const FieldNames& names, std::string& out);
// A JSON string literal, quotes included.
void append_json_string(std::string_view s, std::string& out);
inline std::string json_string(std::string_view s) {
  std::string out;
  append_json_string(s, out);
  return out;
}

// append_json for the hot path of sinks: the `"name":` text of each field name is escaped once
// per FieldId, then copied. Not thread-safe; lives no longer than `names`.
class JsonRecordWriter {
public:
  explicit JsonRecordWriter(const FieldNames& names) : names_(names) {}
  // The same text as append_json(r, names, out).
  void append(const Record& r, std::string& out);

private:
  // `"name":`, made on first use (make_key_text); inline, as it runs for every field written.
  const std::string& key_text(FieldId id) {
    if (id < keys_.size() && !keys_[id].empty()) [[likely]]
      return keys_[id];
    return make_key_text(id);
  }
  const std::string& make_key_text(FieldId id);
  static std::size_t plain_bound(const Value& v);
  void append_general(const Record& r, std::string& out); // arrays, maps, strings to escape

  const FieldNames& names_;
  std::vector<std::string> keys_; // by FieldId: `"name":`, empty until first written
  std::vector<char> scratch_;     // one flat record's text, before it is appended
};

// std::to_chars's text of an int at p, exactly its bytes (at most 20) and nothing past them;
// returns its end. Also for generators that size the text first.
char* write_int(std::int64_t v, char* p);

// Canonical text: object keys sorted (by bytes), numbers normalised so that values that
// values_equal() calls equal print alike where a double can tell: an int prints as itself, a
// float with an integral value in int64 range prints as that integer (2.0 -> "2", -0.0 -> "0"),
// other floats in their shortest form. Not for hot paths (it sorts keys with a temporary).
std::string canonical_json(const Value& v, const FieldNames& names);
std::string canonical_json(const Record& r, const FieldNames& names);

} // namespace streamctl::state
