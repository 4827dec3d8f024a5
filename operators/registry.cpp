#include "operators/registry.hpp"

#include "state/error.hpp"

namespace streamctl::operators {

using pipeline::NodeSpec;
using pipeline::NodeTypeSchema;
using pipeline::PipelineSpec;

void Registry::add_source(NodeTypeSchema schema, SourceFactory factory) {
  schema.takes_inputs = false;
  source_schemas_.push_back(std::move(schema));
  source_factories_.push_back(std::move(factory));
}

void Registry::add_operator(NodeTypeSchema schema, OperatorFactory factory) {
  operator_schemas_.push_back(std::move(schema));
  operator_factories_.push_back(std::move(factory));
}

void Registry::add_sink(NodeTypeSchema schema, SinkFactory factory) {
  sink_schemas_.push_back(std::move(schema));
  sink_factories_.push_back(std::move(factory));
}

namespace {
template <typename Factory>
const Factory& find_factory(const std::vector<NodeTypeSchema>& schemas,
                            const std::vector<Factory>& factories, const NodeSpec& node) {
  for (std::size_t k = 0; k < schemas.size(); ++k)
    if (schemas[k].type == node.type) return factories[k];
  throw Error(ErrorKind::Usage, "node '" + node.name + "': unknown " +
                                    pipeline::role_name(node.role) + " type '" + node.type + "'");
}
} // namespace

std::unique_ptr<Source> Registry::make_source(const PipelineSpec& p, const NodeSpec& node,
                                              state::FieldNames& names) const {
  return find_factory(source_schemas_, source_factories_, node)(p, node, names);
}

std::unique_ptr<Operator> Registry::make_operator(const PipelineSpec& p, const NodeSpec& node,
                                                  state::FieldNames& names) const {
  return find_factory(operator_schemas_, operator_factories_, node)(p, node, names);
}

std::unique_ptr<Sink> Registry::make_sink(const PipelineSpec& p, const NodeSpec& node,
                                          state::FieldNames& names) const {
  return find_factory(sink_schemas_, sink_factories_, node)(p, node, names);
}

void register_builtin_types(Registry& /*registry*/) {
  // Filled in as each type lands; see the list below once it exists.
}

} // namespace streamctl::operators
