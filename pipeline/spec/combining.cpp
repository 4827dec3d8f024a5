#include "pipeline/spec/combining.hpp"

namespace streamctl::pipeline {

void plan_combining(PipelineSpec& spec, const SchemaCatalog& catalog) {
  spec.combined_nodes.assign(spec.nodes.size(), false);
  if (!spec.root["combine"].value_or(true)) return;
  for (std::size_t k = 0; k < spec.nodes.size(); ++k) {
    const NodeTypeSchema* schema = catalog.schema_for(spec.nodes[k]);
    spec.combined_nodes[k] = schema != nullptr && schema->combinable && schema->combinable(spec, spec.nodes[k]);
  }
}

} // namespace streamctl::pipeline
