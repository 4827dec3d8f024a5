#pragma once
// Parsing JSON text into values: the `json` format of sources (SPEC §4: one object a line).
//
// Zero copy: a string without escapes becomes a Value that points into the input text, so the
// caller must make the batch retain the text's memory (Batch::retain). Strings with escapes,
// and the element arrays of nested arrays and objects, are written into the batch's arena.
//
// Accepted: RFC 8259 JSON. Strings and keys must be UTF-8 (state/utf8.hpp) without raw control
// characters (U+0000..U+001F, which must be escaped): a line with either is refused, so that
// what is read can always be written back as JSON. One leniency: a lone UTF-16 surrogate escape
// (\ud800 without its pair) decodes to U+FFFD. Duplicate keys: the last value wins, at the
// position of the first occurrence. Integer literals that fit int64 are Int; every other number
// (fraction, exponent, out of int64 range) is Float. Nesting is limited to 128 levels.
//
// Projection pushdown: given the top-level keys that anything downstream reads (KeptKeys), the
// value of any other key is validated exactly as if it were built (the same errors at the same
// columns) but skipped: no Value, no unescaping, no arena space, no interning of its key.

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "state/batch.hpp"
#include "state/error.hpp"
#include "state/field_names.hpp"
#include "state/json_scan.hpp"
#include "state/value.hpp"

namespace streamctl::state {

// The top-level keys a record keeps, looked up by their bytes in a small table (a few names are
// read per source in practice, so a linear scan that compares lengths first beats hashing).
// The views point into `names`, whose strings never move (FieldNames keeps them in a deque):
// a KeptKeys lives no longer than the FieldNames it was built from.
//
// Or, `left_out`, the keys a record leaves out (pipeline::left_out_mask: a source behind a map
// that removes them), every other key kept.
class KeptKeys {
public:
  // From a mask by FieldId (pipeline::field_mask, or left_out_mask with `left_out`); an empty
  // mask is not allowed here (it means every field: pass no KeptKeys instead).
  KeptKeys(const std::vector<bool>& mask, const FieldNames& names, bool left_out = false);

  // Whether the listed keys are those left out rather than those kept.
  bool lists_left_out() const { return left_out_; }
  // The id of `key` when the list has it, else nullopt.
  std::optional<FieldId> find(std::string_view key) const {
    for (const auto& e : entries_)
      if (e.name.size() == key.size() && equal_short(e.name.data(), key.data(), key.size()))
        return e.id;
    return std::nullopt;
  }

private:
  bool left_out_ = false;
  struct Entry {
    std::string_view name;
    FieldId id;
  };
  std::vector<Entry> entries_;
};

// A parser with reusable scratch space (stacks for nested values, a cache of interned keys), so
// that parsing a line allocates nothing on the heap beyond the batch's arena chunks.
// Not thread-safe: one reader per thread.
class JsonReader {
public:
  static constexpr int max_depth = 128;

  JsonReader();

  // Parses one JSON object (surrounding whitespace allowed) and appends its fields to `builder`.
  // The caller calls builder.reset() before and builder.finish(batch) after. On failure the
  // builder may hold some of the fields; the message names the reason and the 1-based byte
  // column, e.g. "expected ':' at column 12". With `kept`, only the top-level fields it names
  // are appended; the others are validated and skipped (a bad one still fails the record with
  // the same message).
  Result<void> parse_record(std::string_view text, FieldNames& names, Batch& batch,
                            RecordBuilder& builder, const KeptKeys* kept = nullptr);

  // For a reader whose every parse_record passes the same FieldNames and KeptKeys (the lines of
  // one source): the top-level keys of the last record are remembered, and a line whose key at
  // the same position has the same raw bytes takes its id by one comparison, without scanning
  // and interning it. Lines of one source usually repeat their keys in the same order.
  void expect_repeated_keys() { repeated_keys_ = true; }

  // Parses any JSON value (surrounding whitespace allowed).
  Result<Value> parse_value(std::string_view text, FieldNames& names, Batch& batch);

private:
  bool start(std::string_view text, FieldNames& names, Batch& batch);
  bool value(Value& out, int depth);
  bool object(std::vector<Field>& out, int depth);
  bool array(Value& out, int depth);
  const char* scan_string(const char* p);
  bool string_value(Value& out);
  bool key_text(std::string_view& out);
  bool key(FieldId& out);
  const char* string_close(const char* open, const char* first_escape);
  bool check_escapes(const char* open, const char* close);
  bool skip_value(int depth);
  bool skip_object(int depth);
  bool skip_array(int depth);
  bool skip_string();
  bool skip_number();
  bool skip_literal(std::string_view word);
  bool number(Value& out);
  bool literal(std::string_view word, Value v, Value& out);
  bool decode_escaped(const char* open, const char* first_escape, std::string_view& out,
                      bool into_arena);
  void dedup(std::vector<Field>& fields, std::size_t base);
  FieldId intern(std::string_view key);
  bool error(const char* at, std::string_view what);
  bool unexpected(const char* at);

  // Per call.
  const char* begin_ = nullptr;
  const char* end_ = nullptr;
  const char* p_ = nullptr;
  FieldNames* names_ = nullptr;
  Batch* batch_ = nullptr;
  const KeptKeys* kept_ = nullptr; // of the top-level object, in parse_record
  std::string error_;

  // Reused across calls.
  std::vector<Value> values_; // elements of the arrays being parsed, innermost last
  std::vector<Field> fields_; // members of the nested objects being parsed, innermost last
  std::vector<std::uint32_t> seen_generation_; // by FieldId: duplicate detection in big objects
  std::vector<std::uint32_t> seen_position_;
  std::uint32_t generation_ = 0;
  std::string key_buffer_;                  // a key with escapes, decoded
  // With expect_repeated_keys: the raw text and the id (or no_field when not kept) of each
  // top-level key of the last record, by position, and what the ids were made for.
  struct ExpectedKey {
    std::string raw;
    FieldId id;
  };
  bool repeated_keys_ = false;
  std::vector<ExpectedKey> expected_keys_;
  // How many of the first expected keys have ids that differ from each other's (no_field
  // aside), worked out again after expected_keys_ changes: a record whose keys were all
  // predicted and are that many or fewer has no duplicate to look for.
  std::size_t distinct_expected_keys();
  std::size_t distinct_expected_ = 0;
  bool distinct_expected_stale_ = true;
  const FieldNames* expected_names_ = nullptr;
  const KeptKeys* expected_kept_ = nullptr;
  std::array<FieldId, 256> key_cache_;      // direct-mapped: hash of key bytes -> FieldId
};

// Wrappers over a thread-local JsonReader.
Result<void> parse_json_record(std::string_view text, FieldNames& names, Batch& batch,
                               RecordBuilder& builder);
Result<Value> parse_json_value(std::string_view text, FieldNames& names, Batch& batch);

} // namespace streamctl::state
