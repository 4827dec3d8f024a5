#include <CLI/CLI.hpp>
#include <csignal>
#include <malloc.h>
#include <thread>
#include <vector>
#include <sys/prctl.h>
#include <unistd.h>

#include "cli/context.hpp"
#include "cli/value_checks.hpp"
#include "pipeline/runtime/worker.hpp"
#include "pipeline/runtime/worker_bootstrap.hpp"

namespace streamctl::cli {

namespace {

// A worker whose coordinator is gone has nobody to report to and nothing to finish: exactly-
// once sinks publish only on the coordinator's COMMIT, and the next attempt starts from the
// last checkpoint. So it ends as PR_SET_PDEATHSIG ends a local worker, at once, without
// unwinding: closing its sockets could wait in zmq_ctx_term on peers that no longer read.
[[noreturn]] void abandon(spdlog::logger& log, const std::string& why) {
  log.warn("{}: exiting", why);
  log.flush();
  ::_exit(1);
}

// One task: on this thread, with the process's logger. Several: a thread and a logger each,
// every task as it would run alone; the process ends when the last one does, with the first
// non-zero exit code of the tasks (in the order given).
int run_tasks(Context& ctx, const runtime::WorkerOptions& common, const std::vector<int>& tasks) {
  if (tasks.size() == 1) {
    runtime::WorkerOptions options = common;
    options.task = tasks.front();
    // "ok -> slim[2]: warning: ..." says where; "worker 2" would send the reader to `graph`.
    options.on_label = [&ctx](const std::string& label) { ctx.rename_logger(label); };
    return runtime::run_worker(options, *ctx.log);
  }
  // One malloc arena for the process, set before its threads allocate: each task thread would
  // get an arena of its own, whose heaps glibc unmaps as soon as they are empty (the trim
  // threshold of main.cpp keeps only the main arena's), so every batch after a quiet moment
  // faulted its pages in afresh. A dense keyed count at parallelism 2, two tasks a process:
  // 12,200-12,400 -> 2,600-2,700 page faults, 840-910 -> 680-750 ms of CPU (perf stat -r 5).
  ::mallopt(M_ARENA_MAX, 1);
  std::vector<int> codes(tasks.size(), 0);
  std::vector<std::thread> threads;
  threads.reserve(tasks.size());
  for (std::size_t k = 0; k < tasks.size(); ++k) {
    threads.emplace_back([&ctx, &common, &codes, task = tasks[k], k] {
      auto log = ctx.make_logger("worker " + std::to_string(task));
      runtime::WorkerOptions options = common;
      options.task = task;
      options.on_label = [log](const std::string& label) { Context::rename(*log, label); };
      try {
        codes[k] = runtime::run_worker(options, *log);
      } catch (const std::exception& e) {
        log->error("{}", e.what());
        codes[k] = 1;
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int code : codes)
    if (code != 0) return code;
  return 0;
}

} // namespace

void add_worker_command(CLI::App& app, Context& ctx) {
  // Started by the coordinator, never by hand: hidden from --help (an empty group).
  auto* cmd = app.add_subcommand("worker", "Run tasks of a job (started by the coordinator)");
  cmd->group("");
  auto o = std::make_shared<runtime::WorkerOptions>();
  auto job_dir = std::make_shared<std::string>();
  auto base_dir = std::make_shared<std::string>();
  auto socket_dir = std::make_shared<std::string>();
  cmd->add_option("--job-dir", *job_dir)->required();
  cmd->add_option("--base-dir", *base_dir)->required();
  cmd->add_option("--socket-dir", *socket_dir)->required();
  cmd->add_option("--file-name", o->file_name)->required();
  // Repeated: the tasks that share this process (pipeline/spec/worker_sharing.hpp).
  auto tasks = std::make_shared<std::vector<int>>();
  cmd->add_option("--task", *tasks)->required();
  cmd->add_option("--coordinator", o->coordinator)->required();
  cmd->add_option("--transport", o->transport)->check(one_of({"ipc", "tcp"}));
  auto restore = std::make_shared<std::string>();
  auto spool_dir = std::make_shared<std::string>();
  auto bootstrap_fd = std::make_shared<int>(-1);
  cmd->add_option("--attempt", o->attempt);
  cmd->add_option("--restore", *restore);
  cmd->add_option("--spool-dir", *spool_dir);
  cmd->add_option("--run-tag", o->run_tag);
  // The job and its keys come on this descriptor (worker_bootstrap.hpp), which then stays
  // open while the coordinator lives: 0 behind ssh.
  cmd->add_option("--bootstrap-fd", *bootstrap_fd)->check(at_least(0));
  cmd->callback([&ctx, o, tasks, job_dir, base_dir, socket_dir, restore, spool_dir, bootstrap_fd] {
    ctx.configure_logging("worker " + std::to_string(tasks->front()));
    o->job_dir = *job_dir;
    o->base_dir = *base_dir;
    o->socket_dir = *socket_dir;
    o->restore = *restore;
    o->spool_dir = *spool_dir;
    std::unique_ptr<runtime::BootstrapChannelWatch> watch;
    if (*bootstrap_fd >= 0) {
      // Behind ssh the parent is sshd's session for this login: when it goes, so does the
      // worker (a local parent already asked for this in ChildProcess).
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      // A coordinator of another version is refused here, before anything else (exit 2).
      o->bootstrap = runtime::read_bootstrap(*bootstrap_fd);
      spdlog::logger& log = *ctx.log;
      watch = std::make_unique<runtime::BootstrapChannelWatch>(*bootstrap_fd, [&log] {
        abandon(log, "the coordinator has gone (its channel to this worker closed)");
      });
      o->on_coordinator_lost = [&log](const std::string& why) { abandon(log, why); };
    }
    ctx.exit_code = run_tasks(ctx, *o, *tasks);
  });
}

} // namespace streamctl::cli
