#include <CLI/CLI.hpp>
#include <chrono>
#include <iostream>
#include <unistd.h>

#include "cli/context.hpp"
#include "cli/value_checks.hpp"
#include "cli/detach.hpp"
#include "cli/limit_options.hpp"
#include "pipeline/runtime/host_limits.hpp"
#include "pipeline/runtime/job_loader.hpp"
#include "pipeline/spec/lint.hpp"
#include "pipeline/runtime/checkpoint_dir_lock.hpp"
#include "pipeline/runtime/checkpoint_metadata.hpp"
#include "pipeline/runtime/checkpoint_settings.hpp"
#include "pipeline/spec/units.hpp"
#include "pipeline/runtime/coordinator.hpp"
#include "pipeline/runtime/metrics_server.hpp"

namespace streamctl::cli {

std::string self_executable() {
  std::error_code ec;
  auto path = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("streamctl") : path.string();
}

void add_run_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("run", "Run a pipeline as a job; with bounded sources, exit when all input is processed");
  struct Options {
    std::string file;
    int parallelism = 0;
    std::vector<std::string> overrides;
    std::string transport = "ipc";
    std::string launcher;
    bool detach = false;
    std::string from_savepoint;
    bool resume = false;
    bool savepoint_on_exit = false;
    bool allow_non_restored_state = false;
    std::string wait_lock; // "true": --wait-lock without a value; empty: not given
    std::string metrics_listen;
    bool autoscale = false;
    LimitOptions limits;
  };
  auto o = std::make_shared<Options>();
  cmd->add_option("FILE", o->file, "the pipeline file, or - to read it from stdin")->required()->type_name("");
  cmd->add_option("-p,--parallelism", o->parallelism, "default parallelism of every node")
      ->type_name("N")
      ->check(at_least(1));
  cmd->add_option("--set", o->overrides, "override a pipeline value: dotted.key=VALUE (repeatable)")
      ->type_name("KEY=VALUE");
  cmd->add_option("--transport", o->transport,
                  "data channels between local workers: ipc (Unix sockets) or tcp (loopback, as across hosts)")
      ->type_name("ipc|tcp")
      ->check(one_of({"ipc", "tcp"}));
  cmd->add_option("--launcher", o->launcher,
                  "how workers start, instead of the pipeline's [cluster] launcher: local (all on this host; "
                  "[cluster] hosts unused), ssh (on [cluster] hosts), slurm (as steps of the Slurm allocation "
                  "this runs in, or outside one of an allocation run makes with salloc and releases at the end)")
      ->type_name("local|ssh|slurm")
      ->check(one_of({"local", "ssh", "slurm"}));
  cmd->add_flag("--detach", o->detach,
                "print the job id and return; the job runs on, its stdout and log in its directory of the state dir");
  cmd->add_option("--from-savepoint", o->from_savepoint,
                  "start from this savepoint or checkpoint directory (its state, source offsets, pending output)")
      ->type_name("DIR");
  cmd->add_flag("--resume", o->resume,
                "start from the latest savepoint or completed checkpoint of a job with the same name, if any");
  cmd->add_flag("--savepoint-on-exit", o->savepoint_on_exit,
                "when bounded input ends, take a savepoint instead of draining: open windows and offsets wait "
                "in it for the next --resume");
  // A flag that takes a value only as --wait-lock=DURATION: an optional value written apart
  // would take the pipeline file for a duration when other options follow it.
  cmd->add_flag("--wait-lock", o->wait_lock,
                "when another run of the job holds the lock of its checkpoint directory, wait for it, up "
                "to DURATION if given as --wait-lock=DURATION, instead of exiting 2 at once");
  cmd->add_flag("--allow-non-restored-state", o->allow_non_restored_state,
                "restore even when the savepoint holds state of nodes the pipeline no longer has (dropped)");
  cmd->add_option("--metrics-listen", o->metrics_listen,
                  "serve Prometheus text on http://ADDR/metrics, ADDR as host:port (over the file's [metrics] listen)")
      ->type_name("ADDR");
  cmd->add_flag("--autoscale", o->autoscale,
                "let the autoscaler rescale the job's nodes to the parallelism their rates call for "
                "(as --set autoscale.enabled=true)");
  add_limit_options(cmd, o->limits);
  cmd->callback([&ctx, o] {
    ctx.configure_logging("streamctl");
    auto overrides = o->overrides;
    if (o->parallelism > 0) overrides.push_back("parallelism=" + std::to_string(o->parallelism));
    // As --set cluster.launcher=...: validated with the file, and kept with the job's overrides
    // so that `restart` starts it the same way. The local and slurm launchers have no use for
    // the file's hosts (validation refuses hosts with them), so they are dropped.
    if (!o->launcher.empty()) {
      overrides.push_back("cluster.launcher=\"" + o->launcher + "\"");
      if (o->launcher != "ssh") overrides.push_back("cluster.hosts=[]");
    }
    // As --set metrics.listen=..., likewise kept for `restart`. Checked first, so that its
    // problems name the flag (a valid address needs no TOML escaping).
    if (!o->metrics_listen.empty()) {
      runtime::parse_listen_address(o->metrics_listen, "--metrics-listen");
      overrides.push_back("metrics.listen=\"" + o->metrics_listen + "\"");
    }
    // Kept with the job's overrides, so that `restart` autoscales it too.
    if (o->autoscale) overrides.push_back("autoscale.enabled=true");
    auto job = runtime::load_job(o->file, overrides, ctx.registry, o->limits.max_pipeline_size);
    // The log says "warning:" itself.
    for (auto warning : pipeline::lint_pipeline(job.spec, runtime::catalog_of(ctx.registry))) {
      if (auto at = warning.find(": warning: "); at != std::string::npos) warning.erase(at, 9);
      ctx.log->warn("{}", warning);
    }
    runtime::RunOptions options;
    options.state_dir = ctx.state_dir();
    if (!o->from_savepoint.empty() && o->resume)
      throw Error(ErrorKind::Usage, "--from-savepoint and --resume exclude each other");
    // Before anything is read or started: a run that resumes or ends with a savepoint holds the
    // job's lock, with or without [checkpoint], so that two overlapping cron runs never both
    // resume from one savepoint and both publish what follows it (checkpoint_dir_lock.hpp).
    // Taken before the snapshot to resume from is chosen, which no other run can change then.
    auto settings = runtime::checkpoint_settings_of(job.spec, options.state_dir);
    if (o->resume || o->savepoint_on_exit || settings.interval.count() > 0 || !o->wait_lock.empty()) {
      auto wait = std::chrono::milliseconds(0);
      if (o->wait_lock == "true") {
        wait = runtime::CheckpointDirLock::kWaitForever;
      } else if (!o->wait_lock.empty()) {
        auto ms = pipeline::parse_duration_ms(o->wait_lock);
        if (!ms)
          throw Error(ErrorKind::Usage,
                      "--wait-lock: bad duration '" + o->wait_lock + "': " + pipeline::duration_help);
        wait = std::chrono::milliseconds(*ms);
      }
      options.dir_lock = std::make_shared<runtime::CheckpointDirLock>(settings.root, job.spec.file.string(),
                                                                       wait, ctx.log.get());
    }
    options.worker_limits = o->limits.worker_limits();
    // Nothing is started when the job, with the jobs already running here, is too large. After
    // the lock: a second cron run is refused for the run it overlaps, not for its workers.
    auto here = o->limits.worker_limits(options.state_dir);
    runtime::enforce_worker_limits(job, here);
    options.self_executable = self_executable();
    options.transport = o->transport;
    options.worker_log_flags = ctx.worker_log_flags();
    options.savepoint_on_exit = o->savepoint_on_exit;
    options.allow_non_restored_state = o->allow_non_restored_state;
    if (!o->from_savepoint.empty()) options.restore = std::filesystem::absolute(o->from_savepoint);
    if (o->resume) {
      auto root = runtime::checkpoint_root(job.spec, options.state_dir);
      auto latest = runtime::latest_restorable(root);
      if (!latest) throw Error(ErrorKind::Snapshot, latest.error());
      if (*latest) {
        options.restore = **latest;
        ctx.log->info("resuming from {}", (*latest)->string());
      } else {
        ctx.log->info("nothing to resume in {}: starting fresh", root.string());
      }
    }
    if (o->detach) {
      ctx.exit_code = run_detached(job, options, *ctx.log);
      return;
    }
    auto outcome = runtime::run_job(job, options, *ctx.log);
    if ((outcome.exit_code == 1 || outcome.exit_code == 2 || outcome.exit_code == 3) && !outcome.error.empty())
      ctx.log->error("job {} failed: {}", outcome.job_id, outcome.error);
    ctx.exit_code = outcome.exit_code;
  });
}

} // namespace streamctl::cli
