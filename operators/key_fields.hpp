#pragma once
// The `key = [...]` of a keyed node: what forms a record's key, its canonical bytes
// (state/key_codec.hpp) for hashing and state, and the key fields of output rows.
//
// Each entry is an expression (SPEC §5): most often a field name ("user", "geo.city",
// "`odd name`"), read straight from the record; otherwise evaluated per record
// ("seq % 1000", "lower(user)"). An output row's key field is named after the field, or after
// the expression's text. An expression that fails on a record (a type error) makes encode()
// return false: the operator reports the record as bad, the router files it under the null key.
//
// Not thread-safe: one per task thread (it keeps scratch space).

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "pipeline/spec/expression.hpp"
#include "pipeline/spec/pipeline_spec.hpp"
#include "state/arena.hpp"
#include "state/batch.hpp"
#include "state/byte_scratch.hpp"

namespace streamctl::operators {

class KeyFields {
public:
  // Throws Error(Usage), naming the position of `key`, when it is empty or an entry is not a
  // valid expression.
  static KeyFields from_node(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node,
                             state::FieldNames& names);
  // Whether the node is keyed at all (has a `key`).
  static bool is_keyed(const pipeline::NodeSpec& node);

  // The key's canonical bytes; a missing field counts as null. False when a key expression
  // failed on the record (error() says why); `out` then holds the key with null in its place.
  bool encode(const state::Record& record, const state::FieldNames& names, std::string& out);
  const std::string& error() const { return eval_.error; }
  // The key's expressions (the entries that are not top-level fields) over a whole batch at
  // once, for encode_at(): faster than encode() record by record. Nothing to do when every
  // entry is a field. Values that the expressions make live until the next prepare() or
  // encode().
  void prepare(std::span<const state::Record> records);
  // encode() of records[row] of the batch last given to prepare(), `record` being that
  // record: the same bytes, the same result and the same error().
  bool encode_at(std::size_t row, const state::Record& record, const state::FieldNames& names,
                 std::string& out);
  // encode_at() that appends the key's bytes to `out` rather than replacing what it holds (an
  // operator that keeps a batch's keys in one buffer then copies none of them).
  bool append_at(std::size_t row, const state::Record& record, const state::FieldNames& names,
                 std::string& out);
  bool append_at(std::size_t row, const state::Record& record, const state::FieldNames& names,
                 state::ByteScratch& out);
  // Appends the key fields of the record last given to encode() to `builder`; values that
  // an expression made are copied into `out`, the batch the row goes to.
  void append_fields(state::RecordBuilder& builder, state::Batch& out) const;
  // The names of the key fields of output rows, in order.
  const std::vector<state::FieldId>& output_names() const { return output_names_; }

  KeyFields(KeyFields&&) noexcept = default;
  KeyFields& operator=(KeyFields&&) noexcept = default;

private:
  KeyFields() = default;
  // append_at's two halves: the key's values of a row into values_, and its result.
  void gather_at(std::size_t row, const state::Record& record);
  // values_[k] = entry k's field of the record (null when missing); entry k is a field.
  void read_field(std::size_t k, const state::Record& record);
  bool succeeded_at(std::size_t row);

  std::vector<state::FieldId> output_names_;
  // By entry: nullopt where the entry is a top-level field, read as output_names_[k].
  std::vector<std::optional<pipeline::Expression>> expressions_;
  std::vector<state::Value> values_; // of the last record encoded
  bool has_expressions_ = false;
  bool single_field_ = false; // one entry, a top-level field: append_at's short way
  // Of the batch given to prepare(): [entry][row] values of expression entries, and per row
  // whether an expression failed and the error encode() would leave (the last failing one's).
  std::vector<std::vector<state::Value>> columns_;
  std::vector<std::uint8_t> failed_;
  std::vector<std::string> errors_;
  std::unique_ptr<state::Arena> scratch_ = std::make_unique<state::Arena>(1024);
  pipeline::EvalContext eval_;
};

} // namespace streamctl::operators
