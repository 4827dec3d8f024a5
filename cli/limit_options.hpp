#pragma once
// The limit flags of every command that loads a pipeline file (validate, graph, run, test):
// the pipeline file's size and the worker processes per job and per host (streamctl-run(1)
// LIMITS). One place, so that the flags read the same everywhere.

#include <cstddef>
#include <filesystem>
#include <optional>

#include "pipeline/spec/config_loader.hpp"
#include "pipeline/spec/worker_limits.hpp"

namespace CLI {
class App;
}

namespace streamctl::cli {

struct LimitOptions {
  std::size_t max_pipeline_size = pipeline::kDefaultMaxPipelineBytes;
  std::size_t max_workers = 0;      // 0: the default
  std::size_t max_host_workers = 0; // 0: derived from the machine

  // The limits to check: the flags over the defaults. With `state_dir`, the workers of the jobs
  // running there count against the per-host limit (run); without, a check of the job alone.
  pipeline::WorkerLimits
  worker_limits(const std::optional<std::filesystem::path>& state_dir = {}) const;
};

// --max-pipeline-size, --max-workers, --max-host-workers.
void add_limit_options(CLI::App* cmd, LimitOptions& options);

} // namespace streamctl::cli
