#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/context.hpp"
#include "cli/limit_options.hpp"
#include "pipeline/runtime/host_limits.hpp"
#include "pipeline/runtime/job_loader.hpp"
#include "pipeline/spec/lint.hpp"
#include "pipeline/spec/placement_preview.hpp"
#include "state/error.hpp"

namespace streamctl::cli {

void add_validate_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("validate", "Check a pipeline file; print every problem as FILE:LINE:COL: message");
  auto file = std::make_shared<std::string>();
  auto overrides = std::make_shared<std::vector<std::string>>();
  auto limits = std::make_shared<LimitOptions>();
  cmd->add_option("FILE", *file, "the pipeline file")->required();
  cmd->add_option("--set", *overrides, "override a pipeline value: dotted.key=VALUE (repeatable)");
  add_limit_options(cmd, *limits);
  cmd->callback([&ctx, file, overrides, limits] {
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
    if (!ctx.global.quiet)
      std::cerr << *file << ": ok (" << job.spec.nodes.size() << " nodes, " << job.plan.tasks.size()
                << (job.plan.tasks.size() == 1 ? " worker process)\n" : " worker processes)\n");
    ctx.exit_code = 0;
  });
}

} // namespace streamctl::cli
