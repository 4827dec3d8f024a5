#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/context.hpp"
#include "cli/value_checks.hpp"
#include "cli/limit_options.hpp"
#include "pipeline/runtime/host_limits.hpp"
#include "pipeline/runtime/job_loader.hpp"
#include "pipeline/spec/graph_render.hpp"
#include "state/error.hpp"

namespace streamctl::cli {

void add_graph_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand(
      "graph", "Print the logical graph, the physical plan and its placement: subtasks, fused chains, edge partitioning, hosts");
  struct Options {
    std::string file;
    std::string format = "text";
    int parallelism = 0;
    std::vector<std::string> overrides;
    LimitOptions limits;
  };
  auto o = std::make_shared<Options>();
  cmd->add_option("FILE", o->file, "the pipeline file, or - to read it from stdin")->required()->type_name("");
  cmd->add_option("--format", o->format, "text, dot (Graphviz) or json")
      ->type_name("text|dot|json")
      ->check(one_of({"text", "dot", "json"}));
  cmd->add_option("-p,--parallelism", o->parallelism, "default parallelism of every node, as for run")
      ->type_name("N")
      ->check(at_least(1));
  cmd->add_option("--set", o->overrides, "override a pipeline value: dotted.key=VALUE (repeatable)")
      ->type_name("KEY=VALUE");
  add_limit_options(cmd, o->limits);
  cmd->callback([&ctx, o] {
    ctx.configure_logging("streamctl");
    auto overrides = o->overrides;
    if (o->parallelism > 0) overrides.push_back("parallelism=" + std::to_string(o->parallelism));
    auto job = runtime::load_job(o->file, overrides, ctx.registry, o->limits.max_pipeline_size);
    runtime::enforce_worker_limits(job, o->limits.worker_limits());
    auto format = o->format == "dot"    ? pipeline::GraphFormat::Dot
                  : o->format == "json" ? pipeline::GraphFormat::Json
                                        : pipeline::GraphFormat::Text;
    auto placement = pipeline::preview_placement(job.spec, job.plan);
    std::cout << pipeline::render_graph(job.spec, job.plan, placement, format);
    // The graph is shown all the same: it says which chains the problem is about.
    if (!placement.placement) throw Error(ErrorKind::Usage, "cannot place the job: " + placement.placement.error());
    ctx.exit_code = 0;
  });
}

} // namespace streamctl::cli
