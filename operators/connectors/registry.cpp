#include "operators/connectors/registry.hpp"

namespace streamctl::connectors {

void register_connector_types(operators::Registry& registry) {
  (void)registry; // the tcp, zmq and exec types register here as they land (issue 11)
}

void register_all_types(operators::Registry& registry) {
  operators::register_builtin_types(registry);
  register_connector_types(registry);
}

} // namespace streamctl::connectors
