#include <CLI/CLI.hpp>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/context.hpp"
#include "cli/detach.hpp"
#include "pipeline/runtime/checkpoint_metadata.hpp"
#include "pipeline/runtime/coordinator.hpp"
#include "pipeline/runtime/final_publish.hpp"
#include "pipeline/runtime/host_limits.hpp"
#include "pipeline/runtime/job_directory.hpp"
#include "pipeline/runtime/job_registry.hpp"

namespace streamctl::cli {

std::string self_executable(); // run_command.cpp

namespace {

// A run killed while its sinks published its final output (final_publish.hpp) must not run
// again: what it published is covered by no snapshot, so a run from one would publish it
// twice. When every task recorded its output as published, the job is complete: it is marked
// finished and nothing runs (true). Otherwise part of the output may be out and the rest in
// the sinks' pending files: restart refuses (exit 2), and leaves those files for a person.
bool finished_publishing(const runtime::JobEntry& entry, const runtime::LoadedJob& loaded, Context& ctx) {
  runtime::FinishState state = runtime::finish_state(entry.dir);
  if (!state.finishing) return false;
  if (!state.unfinished.empty()) {
    std::string tasks;
    for (auto t : state.unfinished) tasks += (tasks.empty() ? "" : ", ") + std::to_string(t);
    throw Error(ErrorKind::Usage,
                "job " + entry.id + " had read all its input and was publishing its final output when its "
                "coordinator died: task(s) " + tasks + " may have published part of it. Running the job again "
                "would publish output twice, so it is not restarted. What was not published stays in the sinks' "
                "pending files (a file sink's hidden .part-* files, a stdout sink's stdout-*.pending files in '" +
                (runtime::checkpoint_root(loaded.spec, ctx.state_dir()) / "spool").string() +
                "'); run the job anew on its input for a complete output");
  }
  runtime::JobRegistration registration(ctx.state_dir(), loaded.spec, entry.id);
  registration.set_last_checkpoint(entry.last_checkpoint);
  registration.update("finished", {});
  ctx.log->warn("job {} had published all its output before its coordinator died: nothing to restart "
                "(marked finished)", entry.id);
  return true;
}

// A stdin source reads the standard input of the coordinator that ran the job: what that
// process had not read when it died went with it, and `restart`'s own stdin is another
// stream. A restart would take its end for the end of the input and exit 0 with records
// missing, so it is refused before anything starts.
void refuse_lost_stdin(const runtime::JobEntry& entry, const runtime::LoadedJob& loaded) {
  for (const auto& node : loaded.spec.nodes)
    if (node.role == pipeline::NodeRole::Source && node.type == "stdin")
      throw Error(ErrorKind::Usage,
                  "job " + entry.id + " reads source '" + node.name + "' from stdin: its input ended with the "
                  "coordinator that read it, and what that process had not read is gone, so a restart cannot "
                  "finish the job. Run the job again on its whole input (streamctl run " +
                  (entry.pipeline_file.empty() ? std::string("PIPELINE") : entry.pipeline_file) + " < INPUT)");
}

} // namespace

// `restart JOB`: a job that is not running (failed, stopped, cancelled, or whose coordinator
// was killed) runs again under its id, from the pipeline it ran (its job directory keeps it)
// and its latest completed checkpoint or savepoint (SPEC §2, §7).
void add_restart_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("restart", "Restart a job that is not running from its latest checkpoint or savepoint");
  auto job = std::make_shared<std::string>();
  auto detach = std::make_shared<bool>(false);
  cmd->add_option("JOB", *job, "a job id, or a job name (its running job, else the newest)")->required()->type_name("");
  cmd->add_flag("--detach", *detach, "print the job id and return; the job runs on, as with run --detach");
  cmd->callback([&ctx, job, detach] {
    ctx.configure_logging("streamctl");
    runtime::JobEntry entry = runtime::find_job(ctx.state_dir(), *job);
    if (entry.state == "running" || entry.state == "restarting")
      throw Error(ErrorKind::Usage, "job " + entry.id + " is " + entry.state + " (coordinator pid " +
                                        std::to_string(entry.coordinator_pid) + "): stop or cancel it first");
    // A finished job has published all its output; running it again from a checkpoint
    // would publish what followed that checkpoint a second time.
    if (entry.state == "finished")
      throw Error(ErrorKind::Usage, "job " + entry.id + " finished: there is nothing to restart (run it anew)");
    auto stored = runtime::read_stored_pipeline(entry.dir);
    if (!stored.found) throw Error(ErrorKind::Usage, "job " + entry.id + ": its pipeline is missing from " + entry.dir.string());
    std::filesystem::path base_dir = entry.base_dir.empty() ? entry.dir : entry.base_dir;
    std::string file = entry.pipeline_file.empty() ? (entry.dir / "pipeline.toml").string() : entry.pipeline_file;
    // With the values its ${NAME} took when it first ran, not this shell's.
    auto loaded = runtime::load_job_text(stored.text, file, base_dir, stored.overrides, ctx.registry, stored.variables);

    if (finished_publishing(entry, loaded, ctx)) return;
    refuse_lost_stdin(entry, loaded);

    runtime::RunOptions options;
    options.state_dir = ctx.state_dir();
    // The limits the job ran with (run_options; the defaults for jobs of older releases).
    options.worker_limits = runtime::default_worker_limits();
    options.self_executable = self_executable();
    options.worker_log_flags = ctx.worker_log_flags();
    options.reuse_job_id = entry.id;
    // The flags the job was run with (absent for jobs of older releases: the defaults).
    std::ifstream run_options(entry.dir / "run_options");
    for (std::string line; std::getline(run_options, line);) {
      auto eq = line.find('=');
      if (eq == std::string::npos) continue;
      std::string name = line.substr(0, eq), value = line.substr(eq + 1);
      if (name == "transport" && (value == "ipc" || value == "tcp")) options.transport = value;
      if (name == "savepoint_on_exit") options.savepoint_on_exit = value == "1";
      if (name == "allow_non_restored_state") options.allow_non_restored_state = value == "1";
      if (name == "max_workers" || name == "max_host_workers") {
        char* end = nullptr;
        unsigned long long n = std::strtoull(value.c_str(), &end, 10);
        if (end && *end == '\0' && n > 0)
          (name == "max_workers" ? options.worker_limits.per_job : options.worker_limits.per_host) = n;
      }
    }
    auto here = options.worker_limits;
    here.running_elsewhere = runtime::workers_running(options.state_dir);
    runtime::enforce_worker_limits(loaded, here);
    std::optional<std::filesystem::path> from;
    // The last checkpoint (or the snapshot the run started from) while it exists, even damaged:
    // the restore then refuses it (exit 3) rather than going back to an older one, which could
    // publish output twice. Gone, it is refused too, for the same reason.
    std::error_code ec;
    if (!entry.last_checkpoint.empty()) {
      if (!std::filesystem::exists(std::filesystem::path(entry.last_checkpoint) / runtime::kMetadataFile, ec))
        throw Error(ErrorKind::Snapshot,
                    "job " + entry.id + " last ran from " + entry.last_checkpoint +
                        ", which is gone (or incomplete): restarting from an older snapshot would publish again "
                        "what was published after it; restore a copy of it with run --from-savepoint, or run "
                        "the job anew");
      from = entry.last_checkpoint;
    }
    if (!from) {
      auto latest = runtime::latest_restorable(runtime::checkpoint_root(loaded.spec, options.state_dir));
      if (!latest) throw Error(ErrorKind::Snapshot, latest.error());
      from = *latest;
    }
    if (from) {
      options.restore = *from;
      ctx.log->info("restarting job {} from {}", entry.id, from->string());
    } else {
      ctx.log->warn("job {} has no completed checkpoint or savepoint: restarting from the beginning", entry.id);
    }
    if (*detach) {
      ctx.exit_code = run_detached(loaded, options, *ctx.log);
      return;
    }
    auto outcome = runtime::run_job(loaded, options, *ctx.log);
    if ((outcome.exit_code == 1 || outcome.exit_code == 3) && !outcome.error.empty())
      ctx.log->error("job {} failed: {}", outcome.job_id, outcome.error);
    ctx.exit_code = outcome.exit_code;
  });
}

} // namespace streamctl::cli
