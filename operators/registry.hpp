#pragma once
// Maps each TOML `type` to its schema and factory. The built-in list is in registry.cpp, one
// line per type, so that what exists is visible in one place (as Vector's transforms/mod.rs).

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "operators/operator.hpp"
#include "pipeline/spec/node_schema.hpp"

namespace streamctl::operators {

// Factories build the runtime object from a validated node. They throw streamctl::Error(Usage)
// with a "FILE:LINE:COL: message" text for problems validation could not see.
using SourceFactory = std::function<std::unique_ptr<Source>(const pipeline::PipelineSpec&,
                                                            const pipeline::NodeSpec&, state::FieldNames&)>;
using OperatorFactory = std::function<std::unique_ptr<Operator>(
    const pipeline::PipelineSpec&, const pipeline::NodeSpec&, state::FieldNames&)>;
using SinkFactory = std::function<std::unique_ptr<Sink>(const pipeline::PipelineSpec&,
                                                        const pipeline::NodeSpec&, state::FieldNames&)>;

class Registry {
public:
  void add_source(pipeline::NodeTypeSchema schema, SourceFactory factory);
  void add_operator(pipeline::NodeTypeSchema schema, OperatorFactory factory);
  void add_sink(pipeline::NodeTypeSchema schema, SinkFactory factory);

  const std::vector<pipeline::NodeTypeSchema>& source_schemas() const { return source_schemas_; }
  const std::vector<pipeline::NodeTypeSchema>& operator_schemas() const { return operator_schemas_; }
  const std::vector<pipeline::NodeTypeSchema>& sink_schemas() const { return sink_schemas_; }

  // Throw streamctl::Error(Usage) if the type is unknown.
  std::unique_ptr<Source> make_source(const pipeline::PipelineSpec&, const pipeline::NodeSpec&,
                                      state::FieldNames&) const;
  std::unique_ptr<Operator> make_operator(const pipeline::PipelineSpec&, const pipeline::NodeSpec&,
                                          state::FieldNames&) const;
  std::unique_ptr<Sink> make_sink(const pipeline::PipelineSpec&, const pipeline::NodeSpec&,
                                  state::FieldNames&) const;

private:
  std::vector<pipeline::NodeTypeSchema> source_schemas_, operator_schemas_, sink_schemas_;
  std::vector<SourceFactory> source_factories_;
  std::vector<OperatorFactory> operator_factories_;
  std::vector<SinkFactory> sink_factories_;
};

void register_builtin_types(Registry& registry);

} // namespace streamctl::operators
