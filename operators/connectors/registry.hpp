#pragma once
// The connector types (tcp, zmq, exec) and, for the places that build jobs, every type at once.

#include "operators/registry.hpp"

namespace streamctl::connectors {

// One line per connector TOML `type`, as register_builtin_types does for the others.
void register_connector_types(operators::Registry& registry);

// The built-in types and the connectors: what the CLI, workers and the rescale planner use.
void register_all_types(operators::Registry& registry);

} // namespace streamctl::connectors
