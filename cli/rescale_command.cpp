#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/context.hpp"
#include "cli/value_checks.hpp"
#include "pipeline/runtime/job_client.hpp"
#include "pipeline/runtime/job_directory.hpp"

namespace streamctl::cli {

// `rescale` = snapshot (a checkpoint when the job takes them, else a savepoint), stop, re-plan
// with the new parallelism, restore by key group (SPEC §7), done by the job's coordinator,
// which keeps the job id. Returns once the job runs at the new parallelism.
void add_rescale_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("rescale", "Change a running job's parallelism: snapshot, restart with state redistributed");
  auto job = std::make_shared<std::string>();
  auto parallelism = std::make_shared<int>(0);
  auto nodes = std::make_shared<std::vector<std::string>>();
  cmd->add_option("JOB", *job, "a job id, or a job name (its running job, else the newest)")->required()->type_name("");
  cmd->add_option("-p,--parallelism", *parallelism, "the new default parallelism (nodes that set their own keep it)")
      ->type_name("N")
      ->check(at_least(1));
  cmd->add_option("--operator", *nodes, "the new parallelism N of the node NAME (repeatable)")
      ->type_name("NAME=N")
      ->check(name_equals_count());
  cmd->callback([&ctx, job, parallelism, nodes] {
    ctx.configure_logging("streamctl");
    if (*parallelism == 0 && nodes->empty())
      throw Error(ErrorKind::Usage, "streamctl rescale: error: give --parallelism N or --operator NAME=N");
    std::string changes;
    if (*parallelism > 0) changes += "parallelism=" + std::to_string(*parallelism) + "\n";
    for (const auto& n : *nodes) {
      auto eq = n.find('=');
      int value = 0;
      try {
        value = eq == std::string::npos ? 0 : std::stoi(n.substr(eq + 1));
      } catch (const std::exception&) {
      }
      if (eq == 0 || value <= 0)
        throw Error(ErrorKind::Usage, "--operator '" + n + "': expected NAME=N with N a positive number");
      changes += n.substr(0, eq) + "=" + std::to_string(value) + "\n";
    }
    runtime::JobEntry entry = runtime::find_job(ctx.state_dir(), *job);
    if (!ctx.global.quiet) std::cerr << "streamctl: rescaling job " << entry.id << "\n";
    auto reply = runtime::ask_job(entry, transport::ControlMessage{"RESCALE", {}}.set("overrides", changes),
                                  std::chrono::minutes(30));
    if (reply.type != "OK") {
      ctx.log->error("job {}: rescale failed: {}", entry.id, reply.get("message"));
      ctx.exit_code = reply.get("usage") == "1" ? 2 : 1;
      return;
    }
    if (!ctx.global.quiet)
      std::cerr << "streamctl: job " << entry.id << " runs with " << reply.get("parallelism") << " (downtime "
                << reply.get("downtime_ms") << " ms)\n";
    std::cout << reply.get("path") << "\n";
    ctx.exit_code = 0;
  });
}

} // namespace streamctl::cli
