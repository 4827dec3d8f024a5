#include <CLI/CLI.hpp>

#include "cli/context.hpp"
#include "pipeline/runtime/worker.hpp"

namespace streamctl::cli {

void add_worker_command(CLI::App& app, Context& ctx) {
  // Started by the coordinator, never by hand: hidden from --help (an empty group).
  auto* cmd = app.add_subcommand("worker", "Run one task of a job (started by the coordinator)");
  cmd->group("");
  auto o = std::make_shared<runtime::WorkerOptions>();
  auto job_dir = std::make_shared<std::string>();
  auto base_dir = std::make_shared<std::string>();
  auto socket_dir = std::make_shared<std::string>();
  cmd->add_option("--job-dir", *job_dir)->required();
  cmd->add_option("--base-dir", *base_dir)->required();
  cmd->add_option("--socket-dir", *socket_dir)->required();
  cmd->add_option("--file-name", o->file_name)->required();
  cmd->add_option("--task", o->task)->required();
  cmd->add_option("--coordinator", o->coordinator)->required();
  cmd->add_option("--transport", o->transport)->check(CLI::IsMember({"ipc", "tcp"}));
  auto restore = std::make_shared<std::string>();
  auto spool_dir = std::make_shared<std::string>();
  cmd->add_option("--attempt", o->attempt);
  cmd->add_option("--restore", *restore);
  cmd->add_option("--spool-dir", *spool_dir);
  cmd->add_option("--run-tag", o->run_tag);
  cmd->callback([&ctx, o, job_dir, base_dir, socket_dir, restore, spool_dir] {
    ctx.configure_logging("worker " + std::to_string(o->task));
    o->job_dir = *job_dir;
    o->base_dir = *base_dir;
    o->socket_dir = *socket_dir;
    o->restore = *restore;
    o->spool_dir = *spool_dir;
    ctx.exit_code = runtime::run_worker(*o, *ctx.log);
  });
}

} // namespace streamctl::cli
