#include "operators/connectors/registry.hpp"

#include "operators/connectors/exec_operator.hpp"
#include "operators/connectors/exec_sink.hpp"
#include "operators/connectors/exec_source.hpp"
#include "operators/connectors/tcp_sink.hpp"
#include "operators/connectors/tcp_source.hpp"
#include "operators/connectors/zmq_sink.hpp"
#include "operators/connectors/zmq_source.hpp"

namespace streamctl::connectors {

void register_connector_types(operators::Registry& registry) {
  registry.add_source(tcp_source_schema(), make_tcp_source);
  registry.add_source(exec_source_schema(), make_exec_source);
  registry.add_source(zmq_source_schema(), make_zmq_source);
  registry.add_operator(exec_operator_schema(), make_exec_operator);
  registry.add_sink(tcp_sink_schema(), make_tcp_sink);
  registry.add_sink(zmq_sink_schema(), make_zmq_sink);
  registry.add_sink(exec_sink_schema(), make_exec_sink);
}

void register_all_types(operators::Registry& registry) {
  operators::register_builtin_types(registry);
  register_connector_types(registry);
}

} // namespace streamctl::connectors
