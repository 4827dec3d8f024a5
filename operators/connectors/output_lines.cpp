#include "operators/connectors/output_lines.hpp"

#include "operators/text_format_schema.hpp"

namespace streamctl::connectors {

std::vector<pipeline::KeySchema> output_line_keys() {
  auto keys = operators::text_format_keys();
  keys.push_back(pipeline::KeySchema{
      "sequence_field",
      pipeline::KeyType::String,
      false,
      {},
      {},
      "field that numbers each record, the same on replay, for a peer to deduplicate"});
  return keys;
}

OutputLines::OutputLines(const pipeline::NodeSpec& node, state::FieldNames& names)
    : encoder_(node, names) {
  if (auto field = node.config["sequence_field"].value<std::string>())
    sequence_field_ = names.intern(*field);
}

void OutputLines::open(int subtask) {
  if (sequence_field_) sequence_.emplace(*sequence_field_, subtask);
}

void OutputLines::encode(const state::Batch& batch, std::string& out,
                         std::vector<std::size_t>* record_starts) {
  const state::Batch* lines = &batch;
  if (sequence_) {
    stamped_.clear();
    sequence_->stamp(batch, stamped_);
    lines = &stamped_;
  }
  encoder_.encode(*lines, out, record_starts);
}

void OutputLines::snapshot(std::string& out) const {
  if (sequence_) sequence_->snapshot(out);
}

Result<void> OutputLines::restore(const std::vector<std::string_view>& old_subtasks,
                                  int parallelism, const std::string& node) {
  if (!sequence_) return {};
  return sequence_->restore(old_subtasks, parallelism, node);
}

} // namespace streamctl::connectors
