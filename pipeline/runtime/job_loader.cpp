#include "pipeline/runtime/job_loader.hpp"

#include "pipeline/spec/expression.hpp"
#include "state/error.hpp"

namespace streamctl::runtime {

pipeline::SchemaCatalog catalog_of(const operators::Registry& registry) {
  pipeline::SchemaCatalog catalog;
  catalog.sources = registry.source_schemas();
  catalog.operators = registry.operator_schemas();
  catalog.sinks = registry.sink_schemas();
  return catalog;
}

namespace {

[[noreturn]] void throw_diagnostics(const pipeline::Diagnostics& diagnostics) {
  std::string message;
  for (const auto& d : diagnostics) {
    if (!message.empty()) message += '\n';
    message += d.to_string();
  }
  throw Error(ErrorKind::Usage, message);
}

LoadedJob finish_loading(pipeline::LoadResult result, const operators::Registry& registry) {
  if (!result.diagnostics.empty() || !result.spec) throw_diagnostics(result.diagnostics);
  pipeline::PipelineSpec& spec = *result.spec;

  std::string problems;
  for (const auto& node : spec.nodes) {
    state::FieldNames scratch;
    try {
      switch (node.role) {
      case pipeline::NodeRole::Source: registry.make_source(spec, node, scratch); break;
      case pipeline::NodeRole::Operator: registry.make_operator(spec, node, scratch); break;
      case pipeline::NodeRole::Sink: registry.make_sink(spec, node, scratch); break;
      }
    } catch (const Error& e) {
      problems += problems.empty() ? "" : "\n";
      problems += e.what();
    } catch (const pipeline::ExpressionError& e) {
      problems += problems.empty() ? "" : "\n";
      problems += pipeline::position_of(spec, node, "type") + ": " + e.what();
    }
  }
  if (!problems.empty()) throw Error(ErrorKind::Usage, problems);

  LoadedJob job{std::move(spec), {}};
  job.plan = pipeline::plan_job(job.spec);
  return job;
}

} // namespace

LoadedJob load_job(const std::filesystem::path& file, const std::vector<std::string>& overrides,
                   const operators::Registry& registry) {
  return finish_loading(pipeline::load_pipeline(file, overrides, catalog_of(registry)), registry);
}

LoadedJob load_job_text(const std::string& text, const std::string& display_name,
                        const std::filesystem::path& base_dir, const std::vector<std::string>& overrides,
                        const operators::Registry& registry) {
  return finish_loading(
      pipeline::load_pipeline_text(text, display_name, base_dir, overrides, catalog_of(registry)), registry);
}

} // namespace streamctl::runtime
