#pragma once
// Every node type streamctl knows, registered once for the tests that load whole pipelines.

#include "operators/connectors/registry.hpp"
#include "operators/registry.hpp"

namespace streamctl::testing {

inline const operators::Registry& all_node_types() {
  static const operators::Registry registry = [] {
    operators::Registry r;
    connectors::register_all_types(r);
    return r;
  }();
  return registry;
}

} // namespace streamctl::testing
