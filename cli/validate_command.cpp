#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/context.hpp"
#include "cli/value_checks.hpp"
#include "cli/limit_options.hpp"
#include "pipeline/runtime/host_limits.hpp"
#include "pipeline/runtime/job_loader.hpp"
#include "pipeline/runtime/sample_run.hpp"
#include "pipeline/spec/lint.hpp"
#include "pipeline/spec/placement_preview.hpp"
#include "state/error.hpp"

namespace streamctl::cli {

std::string self_executable();

namespace {

// An end-of-run warning ("FILE:LINE:COL: filter 'ok' ...", or without a position) as lint
// prints its own: "FILE:LINE:COL: warning: ...".
std::string as_lint_warning(const std::string& line, const std::string& file) {
  std::size_t at = 0;
  if (line.rfind(file + ":", 0) == 0) {
    // Past "FILE:LINE:COL: ": the file name may hold colons, the numbers do not.
    std::size_t after_file = file.size() + 1;
    std::size_t space = line.find(": ", after_file);
    if (space != std::string::npos &&
        line.find_first_not_of("0123456789:", after_file) == space + 1)
      at = space + 2;
  }
  if (at == 0) return file + ": warning: " + line;
  return line.substr(0, at) + "warning: " + line.substr(at);
}

} // namespace

void add_validate_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("validate", "Check a pipeline file; print every problem as FILE:LINE:COL: message");
  auto file = std::make_shared<std::string>();
  auto overrides = std::make_shared<std::vector<std::string>>();
  auto limits = std::make_shared<LimitOptions>();
  auto sample = std::make_shared<std::string>();
  cmd->add_option("FILE", *file, "the pipeline file, or - to read it from stdin")->required()->type_name("");
  cmd->add_option("--sample", *sample,
                  "also run the pipeline over this file, read by its first source, with its sinks discarding "
                  "their output, and print what the run warns of (nodes that pass on nothing, fields no record has)")
      ->type_name("FILE");
  cmd->add_option("--set", *overrides, "override a pipeline value: dotted.key=VALUE (repeatable)")
      ->type_name("KEY=VALUE");
  add_limit_options(cmd, *limits);
  cmd->callback([&ctx, file, overrides, limits, sample] {
    ctx.configure_logging("streamctl");
    auto job = runtime::load_job(*file, *overrides, ctx.registry, limits->max_pipeline_size);
    // What `run` would refuse is not "ok"; other jobs that may be running then are not counted.
    runtime::enforce_worker_limits(job, limits->worker_limits());
    // Hosts without `slots` count as large enough here; `run` checks their real core counts.
    auto placement = pipeline::preview_placement(job.spec, job.plan);
    if (!placement.placement) throw Error(ErrorKind::Usage, "cannot place the job: " + placement.placement.error());
    // Warnings are not failures: the exit code stays 0.
    for (const auto& warning : pipeline::lint_pipeline(job.spec, runtime::catalog_of(ctx.registry)))
      std::cerr << warning << "\n";
    if (!sample->empty()) {
      runtime::RunOptions options;
      options.state_dir = ctx.state_dir();
      options.self_executable = self_executable();
      options.worker_log_flags = ctx.worker_log_flags();
      // The run's own log would say its end warnings a second time, in another shape.
      auto log = ctx.log->clone("streamctl");
      if (log->level() == spdlog::level::warn) log->set_level(spdlog::level::err);
      auto outcome = runtime::run_sample(job, *sample, ctx.registry, options, *log);
      for (const auto& warning : outcome.warnings)
        std::cerr << as_lint_warning(warning, job.spec.file.string()) << "\n";
      if (outcome.exit_code != 0) {
        std::cerr << job.spec.file.string() << ": the run over the sample '" << *sample << "' failed"
                  << (outcome.error.empty() ? std::string() : ": " + outcome.error) << "\n";
        ctx.exit_code = outcome.exit_code;
        return;
      }
    }
    if (!ctx.global.quiet)
      std::cerr << job.spec.file.string() << ": ok (" << job.spec.nodes.size() << " nodes, " << job.plan.tasks.size()
                << (job.plan.tasks.size() == 1 ? " worker process)\n" : " worker processes)\n");
    ctx.exit_code = 0;
  });
}

} // namespace streamctl::cli
