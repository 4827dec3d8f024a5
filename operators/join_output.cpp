#include "operators/join_output.hpp"

#include <string>

#include "operators/toml_order.hpp"
#include "state/error.hpp"

namespace streamctl::operators {

JoinOutput JoinOutput::from_node(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node,
                                 state::FieldNames& names) {
  JoinOutput output;
  output.left_id_ = names.intern("left");
  output.right_id_ = names.intern("right");
  const std::string where = pipeline::position_of(spec, node, "select");
  for (const auto& [name, value] : in_file_order(node.config["select"].as_table())) {
    const std::string text = value->value_or(std::string());
    std::string problem;
    try {
      auto expression = pipeline::Expression::compile(text, names);
      for (const auto& field : expression.fields())
        if (field != "left" && field != "right") {
          problem = "reads '" + field + "'; refer to the fields of the two sides as left." + field +
                    " or right." + field;
          break;
        }
      if (problem.empty()) {
        output.select_.push_back(
            Selected{names.intern(name), "select." + name, std::move(expression)});
        continue;
      }
    } catch (const pipeline::ExpressionError& e) {
      problem = e.what();
    }
    std::string at = where;
    if (const auto& begin = value->source().begin; begin.line > 0)
      at = spec.file.string() + ":" + std::to_string(begin.line) + ":" +
           std::to_string(begin.column);
    throw Error(ErrorKind::Usage, at + ": join '" + node.name + "': select." + name + " = \"" +
                                      text + "\": " + problem);
  }
  if (node.config["select"].as_table() != nullptr && output.select_.empty())
    throw Error(ErrorKind::Usage,
                where + ": join '" + node.name + "': 'select' must name at least one field");
  return output;
}

bool JoinOutput::emit(const state::Record& left, const state::Record& right, std::int64_t timestamp,
                      state::Batch& out, pipeline::EvalContext& eval) {
  builder_.reset();
  if (select_.empty()) {
    for (const auto& field : left)
      builder_.append(field.name, field.value);
    for (const auto& field : right)
      if (left.find(field.name) == nullptr) builder_.append(field.name, field.value);
  } else {
    pair_fields_[0] = state::Field{left_id_, state::Value::map_of(left.fields, left.size)};
    pair_fields_[1] = state::Field{right_id_, state::Value::map_of(right.fields, right.size)};
    pair_ = state::Record{pair_fields_, 2, timestamp};
    for (const auto& selected : select_) {
      state::Value value;
      if (!selected.expression.eval(pair_, eval, value)) {
        eval.error = selected.label + ": " + eval.error;
        return false;
      }
      builder_.append(selected.name, value);
    }
  }
  builder_.set_timestamp(timestamp);
  builder_.finish(out);
  return true;
}

} // namespace streamctl::operators
