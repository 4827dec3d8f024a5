#include "cli/limit_options.hpp"

#include <CLI/CLI.hpp>

#include "cli/value_checks.hpp"
#include "pipeline/runtime/host_limits.hpp"

namespace streamctl::cli {

pipeline::WorkerLimits
LimitOptions::worker_limits(const std::optional<std::filesystem::path>& state_dir) const {
  pipeline::WorkerLimits limits = runtime::default_worker_limits();
  if (max_workers > 0) limits.per_job = max_workers;
  if (max_host_workers > 0) {
    limits.per_host = max_host_workers;
    limits.per_host_origin = "--max-host-workers";
  }
  if (state_dir) limits.running_elsewhere = runtime::workers_running(*state_dir);
  return limits;
}

void add_limit_options(CLI::App* cmd, LimitOptions& options) {
  cmd->add_option("--max-pipeline-size", options.max_pipeline_size,
                  "refuse a pipeline file larger than this (default 16MiB; units B, KB, MB, KiB, MiB, GiB)")
      ->type_name("SIZE")
      ->transform(byte_size());
  cmd->add_option("--max-workers", options.max_workers,
                  "refuse a job of more worker processes than N (default 1024)")
      ->type_name("N")
      ->check(at_least(1));
  cmd->add_option(
         "--max-host-workers", options.max_host_workers,
         "refuse a job when its workers and those of the other jobs running on this host under the "
         "state dir exceed N (default: 64 per CPU, within memory and ulimit -u)")
      ->type_name("N")
      ->check(at_least(1));
}

} // namespace streamctl::cli
