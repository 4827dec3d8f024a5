#include "operators/field_reads.hpp"

#include "operators/aggregates.hpp"
#include "pipeline/spec/projection.hpp"

namespace streamctl::operators {

void add_key_fields(pipeline::FieldSet& out, const pipeline::NodeSpec& node) {
  const toml::array* key = node.config["key"].as_array();
  if (key == nullptr) return;
  for (const auto& entry : *key) {
    const auto* text = entry.as_string();
    if (text == nullptr) {
      out.add(pipeline::FieldSet::everything());
      continue;
    }
    out.add(pipeline::fields_of_expression(text->get()));
  }
}

void add_aggregate_fields(pipeline::FieldSet& out, const pipeline::NodeSpec& node) {
  const toml::table* table = node.config["aggregates"].as_table();
  if (table == nullptr) return;
  state::FieldNames scratch;
  for (const auto& [name, value] : *table) {
    const auto* text = value.as_string();
    if (text == nullptr) {
      out.add(pipeline::FieldSet::everything());
      continue;
    }
    try {
      auto function = compile_aggregate(text->get(), scratch);
      if (const auto* argument = function->argument())
        for (const auto& field : argument->fields()) out.add(field);
    } catch (const pipeline::ExpressionError&) {
      out.add(pipeline::FieldSet::everything());
    }
  }
}

void add_expression_fields(pipeline::FieldSet& out, const toml::node* setting) {
  if (setting == nullptr) return;
  const auto* text = setting->as_string();
  out.add(text != nullptr ? pipeline::fields_of_expression(text->get()) : pipeline::FieldSet::everything());
}

} // namespace streamctl::operators
