#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/context.hpp"
#include "cli/value_checks.hpp"
#include "cli/limit_options.hpp"
#include "pipeline/runtime/host_limits.hpp"
#include "pipeline/runtime/test_runner.hpp"

namespace streamctl::cli {

std::string self_executable();

void add_test_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("test", "Run the [[test]] cases of a pipeline file; print one line per case");
  struct Options {
    std::string file;
    int parallelism = 0;
    std::vector<std::string> overrides;
    LimitOptions limits;
  };
  auto o = std::make_shared<Options>();
  cmd->add_option("FILE", o->file, "the pipeline file, or - to read it from stdin")->required()->type_name("");
  cmd->add_option("-p,--parallelism", o->parallelism, "default parallelism of every node")
      ->type_name("N")
      ->check(at_least(1));
  cmd->add_option("--set", o->overrides, "override a pipeline value: dotted.key=VALUE (repeatable)")
      ->type_name("KEY=VALUE");
  add_limit_options(cmd, o->limits);
  cmd->callback([&ctx, o] {
    ctx.configure_logging("streamctl");
    auto overrides = o->overrides;
    if (o->parallelism > 0) overrides.push_back("parallelism=" + std::to_string(o->parallelism));
    // The cases read files in place of every source: a stdin source is fine with "-" here.
    auto job = runtime::load_job(o->file, overrides, ctx.registry, o->limits.max_pipeline_size,
                                 /*sources_replaced=*/true);
    runtime::enforce_worker_limits(job, o->limits.worker_limits(ctx.state_dir()));
    if (job.spec.tests.empty()) {
      std::cerr << job.spec.file.string() << ": no [[test]] cases\n";
      ctx.exit_code = 2;
      return;
    }
    runtime::RunOptions options;
    options.state_dir = ctx.state_dir();
    options.self_executable = self_executable();
    options.worker_log_flags = ctx.worker_log_flags();
    auto outcomes = runtime::run_pipeline_tests(job, ctx.registry, options, *ctx.log, std::cout);
    std::size_t passed = 0;
    for (const auto& outcome : outcomes) passed += outcome.passed ? 1 : 0;
    std::cout << passed << " passed, " << outcomes.size() - passed << " failed\n";
    ctx.exit_code = passed == outcomes.size() ? 0 : 1;
  });
}

} // namespace streamctl::cli
