#include "operators/connectors/registry.hpp"

#include "operators/connectors/exec_operator.hpp"

namespace streamctl::connectors {

void register_connector_types(operators::Registry& registry) {
  registry.add_operator(exec_operator_schema(), make_exec_operator);
}

void register_all_types(operators::Registry& registry) {
  operators::register_builtin_types(registry);
  register_connector_types(registry);
}

} // namespace streamctl::connectors
