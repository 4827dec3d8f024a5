#include "operators/partition_key.hpp"

#include "state/error.hpp"
#include "state/key_codec.hpp"

namespace streamctl::operators {

std::string join_on_text(const pipeline::NodeSpec& node, int input) {
  return node.config["on"][input == 0 ? "left" : "right"].value_or(std::string());
}

std::optional<PartitionKey> PartitionKey::for_input(const pipeline::PipelineSpec& spec,
                                                    const pipeline::NodeSpec& node, int input,
                                                    state::FieldNames& names) {
  if (KeyFields::is_keyed(node)) return PartitionKey(KeyFields::from_node(spec, node, names));
  if (node.type != "join") return std::nullopt;
  std::string text = join_on_text(node, input);
  try {
    return PartitionKey(pipeline::Expression::compile(text, names));
  } catch (const pipeline::ExpressionError& e) {
    throw Error(ErrorKind::Usage, pipeline::position_of(spec, node, "on") + ": join '" + node.name +
                                      "': on." + (input == 0 ? "left" : "right") + ": " + e.what());
  }
}

void PartitionKey::encode(const state::Record& record, const state::FieldNames& names,
                          std::string& out) {
  if (fields_) {
    fields_->encode(record, names, out); // a failed key expression: the null key (the operator reports it)
    return;
  }
  scratch_->reset();
  eval_.arena = scratch_.get();
  state::Value value = state::Value::null();
  if (!expression_->eval(record, eval_, value)) value = state::Value::null();
  state::encode_key(std::span<const state::Value>(&value, 1), names, out);
}

void PartitionKey::prepare(std::span<const state::Record> records) {
  if (fields_) {
    fields_->prepare(records);
    return;
  }
  scratch_->reset();
  eval_.arena = scratch_.get();
  values_.resize(records.size());
  std::size_t at = 0;
  while (at < records.size()) {
    at += expression_->eval_batch(records.subspan(at), eval_, values_.data() + at);
    if (at < records.size()) values_[at++] = state::Value::null(); // as encode(): the null key
  }
}

void PartitionKey::encode_at(std::size_t row, const state::Record& record,
                             const state::FieldNames& names, std::string& out) {
  if (fields_) {
    fields_->encode_at(row, record, names, out);
    return;
  }
  state::encode_key(std::span<const state::Value>(&values_[row], 1), names, out);
}

void PartitionKey::encode_at(std::size_t row, const state::Record& record,
                             const state::FieldNames& names, state::ByteScratch& out) {
  out.clear();
  if (fields_) {
    fields_->append_at(row, record, names, out); // a failed entry is null in it, as encode_at
    return;
  }
  state::append_key(std::span<const state::Value>(&values_[row], 1), names, out);
}

} // namespace streamctl::operators
