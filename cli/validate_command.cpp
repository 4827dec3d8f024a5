#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/context.hpp"
#include "pipeline/runtime/job_loader.hpp"

namespace streamctl::cli {

void add_validate_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("validate", "Check a pipeline file; print every problem as FILE:LINE:COL: message");
  auto file = std::make_shared<std::string>();
  auto overrides = std::make_shared<std::vector<std::string>>();
  cmd->add_option("FILE", *file, "the pipeline file")->required();
  cmd->add_option("--set", *overrides, "override a pipeline value: dotted.key=VALUE (repeatable)");
  cmd->callback([&ctx, file, overrides] {
    ctx.configure_logging("streamctl");
    auto job = runtime::load_job(*file, *overrides, ctx.registry);
    if (!ctx.global.quiet)
      std::cerr << *file << ": ok (" << job.spec.nodes.size() << " nodes, " << job.plan.tasks.size()
                << (job.plan.tasks.size() == 1 ? " worker process)\n" : " worker processes)\n");
    ctx.exit_code = 0;
  });
}

} // namespace streamctl::cli
