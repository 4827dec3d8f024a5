#pragma once
// The key that routes a record on a keyed edge and files it in the consumer's state: the
// consumer's `key = [...]` fields, or, for the inputs of a hash join, its `on.left` (input 0)
// or `on.right` (input 1) expression. The data plane's router and the operator encode keys
// here, the same way, so that equal keys of both sides meet in one subtask and one entry.
//
// A join key is one value encoded as a one-field key (state/key_codec.hpp); an expression that
// fails on a record gives the null key here (the join reports the record as bad itself).
//
// Not thread-safe: one per task thread (it keeps scratch space).

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "operators/key_fields.hpp"
#include "pipeline/spec/expression.hpp"
#include "pipeline/spec/pipeline_spec.hpp"
#include "state/arena.hpp"
#include "state/batch.hpp"

namespace streamctl::operators {

class PartitionKey {
public:
  // The key of `node`'s input number `input`; nullopt when that input is not keyed. Throws
  // Error(Usage) with the position for a bad `key` or `on` expression.
  static std::optional<PartitionKey> for_input(const pipeline::PipelineSpec& spec,
                                               const pipeline::NodeSpec& node, int input,
                                               state::FieldNames& names);

  void encode(const state::Record& record, const state::FieldNames& names, std::string& out);
  // The key's expressions over a whole batch at once, for encode_at(): faster than encode()
  // record by record (KeyFields::prepare).
  void prepare(std::span<const state::Record> records);
  // encode() of records[row] of the batch last given to prepare(), `record` being that record.
  void encode_at(std::size_t row, const state::Record& record, const state::FieldNames& names,
                 std::string& out);
  void encode_at(std::size_t row, const state::Record& record, const state::FieldNames& names,
                 state::ByteScratch& out);

  PartitionKey(PartitionKey&&) noexcept = default;
  PartitionKey& operator=(PartitionKey&&) noexcept = default;

private:
  explicit PartitionKey(KeyFields fields) : fields_(std::move(fields)) {}
  explicit PartitionKey(pipeline::Expression expression) : expression_(std::move(expression)) {}

  std::optional<KeyFields> fields_;
  std::optional<pipeline::Expression> expression_;
  std::unique_ptr<state::Arena> scratch_ = std::make_unique<state::Arena>(1024);
  pipeline::EvalContext eval_;
  std::vector<state::Value> values_; // of the batch given to prepare(), for expression_
};

// The expression text of a join's `on.left` (input 0) or `on.right` (input 1), empty when
// absent.
std::string join_on_text(const pipeline::NodeSpec& node, int input);

} // namespace streamctl::operators
