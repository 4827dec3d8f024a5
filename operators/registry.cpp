#include "operators/registry.hpp"

#include "operators/dedup.hpp"
#include "operators/event_time.hpp"
#include "operators/file_sink.hpp"
#include "operators/file_source.hpp"
#include "operators/filter.hpp"
#include "operators/flat_map.hpp"
#include "operators/generator_source.hpp"
#include "operators/join.hpp"
#include "operators/map.hpp"
#include "operators/reduce.hpp"
#include "operators/shed.hpp"
#include "operators/stdin_source.hpp"
#include "operators/stdout_sink.hpp"
#include "operators/window.hpp"
#include "state/error.hpp"

namespace streamctl::operators {

using pipeline::NodeSpec;
using pipeline::NodeTypeSchema;
using pipeline::PipelineSpec;

void Registry::add_source(NodeTypeSchema schema, SourceFactory factory) {
  schema.takes_inputs = false;
  // Every source can assign event time; the task loop does it, not each source.
  for (auto& key : event_time_keys()) schema.keys.push_back(std::move(key));
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

void register_builtin_types(Registry& registry) {
  registry.add_source(stdin_source_schema(), make_stdin_source);
  registry.add_source(file_source_schema(), make_file_source);
  registry.add_source(generator_source_schema(), make_generator_source);

  registry.add_operator(filter_schema(), make_filter);
  registry.add_operator(map_schema(), make_map);
  registry.add_operator(flat_map_schema(), make_flat_map);
  registry.add_operator(reduce_schema(), make_reduce);
  registry.add_operator(join_schema(), make_join);
  registry.add_operator(dedup_schema(), make_dedup);
  registry.add_operator(window_schema(), make_window);
  registry.add_operator(shed_schema(), make_shed);

  registry.add_sink(stdout_sink_schema(), make_stdout_sink);
  registry.add_sink(file_sink_schema(), make_file_sink);
}

} // namespace streamctl::operators
