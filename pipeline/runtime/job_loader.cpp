#include "pipeline/runtime/job_loader.hpp"

#include "operators/record_error_policy.hpp"
#include "pipeline/spec/expression.hpp"
#include "pipeline/spec/projection.hpp"
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

LoadedJob finish_loading(pipeline::LoadResult result, const operators::Registry& registry, std::string text,
                         std::vector<std::string> overrides) {
  if (!result.diagnostics.empty() || !result.spec) throw_diagnostics(result.diagnostics);
  pipeline::PipelineSpec& spec = *result.spec;
  pipeline::plan_projection(spec, catalog_of(registry));

  std::string problems;
  for (const auto& node : spec.nodes) {
    state::FieldNames scratch;
    try {
      switch (node.role) {
      case pipeline::NodeRole::Source: registry.make_source(spec, node, scratch); break;
      case pipeline::NodeRole::Operator: registry.make_operator(spec, node, scratch); break;
      case pipeline::NodeRole::Sink: registry.make_sink(spec, node, scratch); break;
      }
      operators::check_dead_letter_path(spec, node);
    } catch (const Error& e) {
      problems += problems.empty() ? "" : "\n";
      problems += e.what();
    } catch (const pipeline::ExpressionError& e) {
      problems += problems.empty() ? "" : "\n";
      problems += pipeline::position_of(spec, node, "type") + ": " + e.what();
    }
  }
  // An explicit forward edge pairs subtask i with subtask i: both ends need the same count.
  for (const auto& node : spec.nodes) {
    if (node.partition != pipeline::Partition::Forward) continue;
    for (const auto& input : node.inputs) {
      const pipeline::NodeSpec* up = spec.find(input);
      if (up == nullptr || spec.parallelism_of(*up) == spec.parallelism_of(node)) continue;
      problems += problems.empty() ? "" : "\n";
      problems += pipeline::position_of(spec, node, "partition") + ": partition = \"forward\" needs equal " +
                  "parallelism, but '" + input + "' has " + std::to_string(spec.parallelism_of(*up)) + " and '" +
                  node.name + "' has " + std::to_string(spec.parallelism_of(node)) + "; use \"rebalance\"";
    }
  }
  if (!problems.empty()) throw Error(ErrorKind::Usage, problems);

  LoadedJob job{std::move(spec), {}, std::move(text), std::move(overrides)};
  job.plan = pipeline::plan_job(job.spec);
  return job;
}

} // namespace

LoadedJob load_job(const std::filesystem::path& file, const std::vector<std::string>& overrides,
                   const operators::Registry& registry, std::size_t max_file_bytes) {
  // The text the spec was built from, read once: a second read of a pipe would find it empty.
  auto result = pipeline::load_pipeline(file, overrides, catalog_of(registry), max_file_bytes);
  std::string text = std::move(result.text);
  return finish_loading(std::move(result), registry, std::move(text), overrides);
}

LoadedJob load_job_text(const std::string& text, const std::string& display_name,
                        const std::filesystem::path& base_dir, const std::vector<std::string>& overrides,
                        const operators::Registry& registry) {
  return finish_loading(pipeline::load_pipeline_text(text, display_name, base_dir, overrides, catalog_of(registry)),
                        registry, text, overrides);
}

} // namespace streamctl::runtime
