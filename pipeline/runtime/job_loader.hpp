#pragma once
// Turns a pipeline file into a job that can run: validation against every registered type's
// schema, a trial construction of every node (which finds what only a factory can see: a
// path glob matching no file, an output directory that cannot be written), and the plan.

#include <filesystem>
#include <string>
#include <vector>

#include "operators/registry.hpp"
#include "pipeline/spec/config_loader.hpp"
#include "pipeline/spec/plan.hpp"

namespace streamctl::runtime {

struct LoadedJob {
  pipeline::PipelineSpec spec;
  pipeline::PhysicalPlan plan;
  // What the workers load again: the file's text as written (toml++ tables forget the order of
  // keys, and `set` keeps it) and the --set overrides.
  std::string text;
  std::vector<std::string> overrides;
  // The values its ${NAME} took, read from the environment of the command that loaded the
  // file (env_expansion.hpp). They travel with `text` (worker bootstrap, the job directory)
  // and every later load of `text` is given them: a worker on another host or a `restart`
  // from another shell would otherwise expand other values than those that were validated.
  pipeline::PipelineVariables variables;
};

pipeline::SchemaCatalog catalog_of(const operators::Registry& registry);

// Throw streamctl::Error(Usage) whose message is every problem, one "FILE:LINE:COL: message"
// per line.
// The file is read once, at most `max_file_bytes` of it (config_loader.hpp); "-" is standard
// input, and then a `stdin` source is refused (stdin is the pipeline) unless
// `sources_replaced`: `streamctl test` runs its cases with every source replaced by a file.
LoadedJob load_job(const std::filesystem::path& file, const std::vector<std::string>& overrides,
                   const operators::Registry& registry,
                   std::size_t max_file_bytes = pipeline::kDefaultMaxPipelineBytes,
                   bool sources_replaced = false);
// `variables`: the record that came with `text` (LoadedJob::variables); the environment is
// not read.
LoadedJob load_job_text(const std::string& text, const std::string& display_name,
                        const std::filesystem::path& base_dir, const std::vector<std::string>& overrides,
                        const operators::Registry& registry,
                        const pipeline::PipelineVariables& variables = {});

} // namespace streamctl::runtime
