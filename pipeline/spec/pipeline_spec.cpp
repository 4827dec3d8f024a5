#include "pipeline/spec/pipeline_spec.hpp"
#include "pipeline/spec/node_schema.hpp"
#include "pipeline/spec/units.hpp"

namespace streamctl::pipeline {

std::string position_of(const PipelineSpec& spec, const NodeSpec& node, std::string_view key) {
  std::uint32_t line = node.where.line;
  std::uint32_t column = node.where.column;
  if (const toml::node* value = node.config.get(key)) {
    const auto& begin = value->source().begin;
    if (begin.line > 0) {
      line = begin.line;
      column = begin.column;
    }
  }
  return spec.file.string() + ":" + std::to_string(line) + ":" + std::to_string(column);
}

std::int64_t duration_ms_or(const toml::node* value, std::int64_t fallback) {
  if (value == nullptr) return fallback;
  if (auto n = value->value<std::int64_t>()) return *n;
  if (auto text = value->value<std::string>()) return parse_duration_ms(*text).value_or(fallback);
  return fallback;
}

const char* role_name(NodeRole role) {
  switch (role) {
  case NodeRole::Source: return "source";
  case NodeRole::Operator: return "operator";
  case NodeRole::Sink: return "sink";
  }
  return "?";
}

const char* partition_name(Partition p) {
  switch (p) {
  case Partition::Forward: return "forward";
  case Partition::Rebalance: return "rebalance";
  case Partition::Broadcast: return "broadcast";
  case Partition::Key: return "key";
  }
  return "?";
}

const char* key_type_name(KeyType t) {
  switch (t) {
  case KeyType::String: return "string";
  case KeyType::Int: return "integer";
  case KeyType::Float: return "number";
  case KeyType::Bool: return "boolean";
  case KeyType::Duration: return "duration (like \"250ms\", \"5s\", \"2m\")";
  case KeyType::Size: return "size (like \"64KiB\", \"10MB\")";
  case KeyType::Expression: return "expression string";
  case KeyType::ExpressionMap: return "table of expressions";
  case KeyType::StringArray: return "array of strings";
  case KeyType::StringMap: return "table of strings";
  case KeyType::Enum: return "string";
  case KeyType::Table: return "table";
  }
  return "?";
}

} // namespace streamctl::pipeline
