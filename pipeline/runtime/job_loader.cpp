#include "pipeline/runtime/job_loader.hpp"

#include "operators/record_error_policy.hpp"
#include "pipeline/spec/combining.hpp"
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

// With the pipeline read from stdin, a `stdin` source would read what follows the pipeline's
// text, which is nothing: refused before anything starts.
void refuse_stdin_sources(const pipeline::PipelineSpec& spec) {
  std::string problems;
  for (const auto& node : spec.nodes) {
    if (node.role != pipeline::NodeRole::Source || node.type != "stdin") continue;
    problems += problems.empty() ? "" : "\n";
    problems += pipeline::position_of(spec, node, "type") + ": source '" + node.name +
                "' reads stdin, but the pipeline itself is read from stdin ('-' as the file): give the "
                "pipeline as a file to read records from stdin";
  }
  if (!problems.empty()) throw Error(ErrorKind::Usage, problems);
}

LoadedJob finish_loading(pipeline::LoadResult result, const operators::Registry& registry, std::string text,
                         std::vector<std::string> overrides, bool from_stdin = false) {
  if (!result.diagnostics.empty() || !result.spec) throw_diagnostics(result.diagnostics);
  pipeline::PipelineSpec& spec = *result.spec;
  if (from_stdin) refuse_stdin_sources(spec);
  pipeline::plan_projection(spec, catalog_of(registry));
  pipeline::plan_combining(spec, catalog_of(registry));

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

  LoadedJob job{std::move(spec), {}, std::move(text), std::move(overrides), std::move(result.variables)};
  job.plan = pipeline::plan_job(job.spec);
  return job;
}

} // namespace

LoadedJob load_job(const std::filesystem::path& file, const std::vector<std::string>& overrides,
                   const operators::Registry& registry, std::size_t max_file_bytes, bool sources_replaced) {
  // The text the spec was built from, read once: a second read of a pipe would find it empty.
  auto result = pipeline::load_pipeline(file, overrides, catalog_of(registry), max_file_bytes);
  std::string text = std::move(result.text);
  return finish_loading(std::move(result), registry, std::move(text), overrides,
                        file == pipeline::kStdinPipeline && !sources_replaced);
}

LoadedJob load_job_text(const std::string& text, const std::string& display_name,
                        const std::filesystem::path& base_dir, const std::vector<std::string>& overrides,
                        const operators::Registry& registry, const pipeline::PipelineVariables& variables) {
  return finish_loading(
      pipeline::load_pipeline_text(text, display_name, base_dir, overrides, catalog_of(registry), variables),
      registry, text, overrides);
}

} // namespace streamctl::runtime
