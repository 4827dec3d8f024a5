#include "operators/key_fields.hpp"

#include "state/error.hpp"
#include "state/key_codec.hpp"

namespace streamctl::operators {

bool KeyFields::is_keyed(const pipeline::NodeSpec& node) { return node.config.contains("key"); }

KeyFields KeyFields::from_node(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node,
                               state::FieldNames& names) {
  KeyFields key;
  auto where = [&] { return pipeline::position_of(spec, node, "key") + ": node '" + node.name + "': "; };
  if (const auto* list = node.config["key"].as_array())
    for (const auto& entry : *list) {
      std::string text = entry.value_or(std::string());
      try {
        auto expression = pipeline::Expression::compile(text, names);
        auto reference = expression.field_reference();
        if (reference && reference->top_level) {
          key.output_names_.push_back(names.intern(reference->name));
          key.expressions_.emplace_back(std::nullopt);
          continue;
        }
        key.output_names_.push_back(names.intern(reference ? reference->name : text));
        key.expressions_.emplace_back(std::move(expression));
      } catch (const pipeline::ExpressionError& e) {
        throw Error(ErrorKind::Usage, where() + "key '" + text + "' is not a field name or an expression: " +
                                          e.what() + " (at offset " + std::to_string(e.offset()) + ")");
      }
    }
  if (key.output_names_.empty()) throw Error(ErrorKind::Usage, where() + "'key' needs at least one field");
  key.values_.resize(key.output_names_.size());
  key.columns_.resize(key.output_names_.size());
  for (const auto& e : key.expressions_) key.has_expressions_ = key.has_expressions_ || e.has_value();
  key.single_field_ = key.output_names_.size() == 1 && !key.has_expressions_;
  key.eval_.arena = key.scratch_.get();
  return key;
}

bool KeyFields::encode(const state::Record& record, const state::FieldNames& names, std::string& out) {
  bool ok = true;
  scratch_->reset();
  for (std::size_t k = 0; k < output_names_.size(); ++k) {
    if (!expressions_[k]) {
      read_field(k, record);
    } else if (!expressions_[k]->eval(record, eval_, values_[k])) {
      values_[k] = state::Value::null();
      ok = false;
    }
  }
  state::encode_key(values_, names, out);
  return ok;
}

void KeyFields::prepare(std::span<const state::Record> records) {
  if (!has_expressions_) return;
  scratch_->reset();
  failed_.assign(records.size(), 0);
  errors_.resize(records.size());
  for (std::size_t k = 0; k < expressions_.size(); ++k) {
    if (!expressions_[k]) continue;
    std::vector<state::Value>& column = columns_[k];
    column.resize(records.size());
    std::size_t at = 0;
    while (at < records.size()) {
      at += expressions_[k]->eval_batch(records.subspan(at), eval_, column.data() + at);
      if (at == records.size()) break;
      // As encode(): a failed entry is null, and error() is the last failing entry's.
      column[at] = state::Value::null();
      failed_[at] = 1;
      errors_[at] = eval_.error;
      ++at;
    }
  }
}

bool KeyFields::encode_at(std::size_t row, const state::Record& record,
                          const state::FieldNames& names, std::string& out) {
  out.clear();
  return append_at(row, record, names, out);
}

bool KeyFields::append_at(std::size_t row, const state::Record& record,
                          const state::FieldNames& names, std::string& out) {
  gather_at(row, record);
  state::append_key(values_, names, out);
  return succeeded_at(row);
}

bool KeyFields::append_at(std::size_t row, const state::Record& record,
                          const state::FieldNames& names, state::ByteScratch& out) {
  if (single_field_) { // a field cannot fail: nothing for succeeded_at to say
    read_field(0, record);
    state::append_key(values_[0], names, out);
    return true;
  }
  gather_at(row, record);
  state::append_key(values_, names, out);
  return succeeded_at(row);
}

void KeyFields::gather_at(std::size_t row, const state::Record& record) {
  for (std::size_t k = 0; k < output_names_.size(); ++k) {
    if (!expressions_[k])
      read_field(k, record);
    else
      values_[k] = columns_[k][row];
  }
}

void KeyFields::read_field(std::size_t k, const state::Record& record) {
  const state::Value* v = record.find(output_names_[k]);
  values_[k] = v ? *v : state::Value::null();
}

bool KeyFields::succeeded_at(std::size_t row) {
  if (!has_expressions_ || !failed_[row]) return true;
  eval_.error = errors_[row];
  return false;
}

void KeyFields::append_fields(state::RecordBuilder& builder, state::Batch& out) const {
  for (std::size_t k = 0; k < output_names_.size(); ++k)
    builder.append(output_names_[k], expressions_[k] ? out.copy_value(values_[k]) : values_[k]);
}

} // namespace streamctl::operators
