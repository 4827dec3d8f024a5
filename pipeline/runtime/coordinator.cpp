#include "pipeline/runtime/coordinator.hpp"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <sys/wait.h>

#include "pipeline/runtime/checkpoint_coordinator.hpp"
#include "pipeline/runtime/checkpoint_dir_lock.hpp"
#include "pipeline/runtime/checkpoint_restore.hpp"
#include "pipeline/runtime/client_commands.hpp"
#include "pipeline/runtime/control_channel.hpp"
#include "pipeline/runtime/final_publish.hpp"
#include "pipeline/runtime/job_metrics.hpp"
#include "pipeline/runtime/job_registry.hpp"
#include "pipeline/runtime/job_status.hpp"
#include "pipeline/runtime/local_launcher.hpp"
#include "pipeline/runtime/signal_channel.hpp"
#include "pipeline/runtime/spool_janitor.hpp"
#include "pipeline/runtime/worker_pool.hpp"
#include "pipeline/spec/schema_check.hpp"
#include "state/error.hpp"

namespace streamctl::runtime {

namespace {

using namespace std::chrono_literals;

constexpr auto kStartupTimeout = 60s;
constexpr auto kProgressEvery = 10s;

// The restore a job starts from must fit its pipeline (SPEC §7): refused with exit 3.
void check_restore(const std::filesystem::path& path, const pipeline::PipelineSpec& spec, bool allow_non_restored) {
  auto restore = CheckpointRestore::open(path);
  if (!restore) throw Error(ErrorKind::Snapshot, restore.error());
  // Every segment's checksums, before anything starts: a damaged file is refused here with
  // exit 3, not found by a worker half-way through its restore.
  if (auto ok = restore->verify(); !ok) throw Error(ErrorKind::Snapshot, ok.error());
  auto problems = check_restore_compatible(*restore, spec, allow_non_restored);
  if (!problems.empty()) throw Error(ErrorKind::Snapshot, pipeline::detail::join(problems, "\n"));
}

// One run of a job: its attempts (the first, restarts after failures, rescales), the signals
// and failures that end it, and its record under the state dir. The workers, the checkpoints
// and the client commands are its collaborators' (worker_pool.hpp, checkpoint_coordinator.hpp,
// client_commands.hpp); the coordinator decides what their events mean for the job.
//
// Not thread-safe: the thread that calls run() is the only one that touches it.
class Coordinator final : CheckpointListener, JobControl {
public:
  Coordinator(const LoadedJob& job, const RunOptions& options, spdlog::logger& log)
      : job_(job), options_(options), log_(log), launcher_(std::make_unique<LocalLauncher>(options.self_executable)),
        workers_(*launcher_, control_) {}

  ~Coordinator() override {
    // An exception ended run() before job.json was written (cannot bind, cannot fork): keep a
    // record of the job whose id `run --detach` printed; otherwise its directory goes.
    if (registration_ && options_.on_registered && !registration_->published()) {
      try {
        registration_->update("failed", {});
      } catch (const std::exception&) {
      }
    }
    workers_.clear(); // kills and reaps any worker still running
    control_.close();
  }

  RunOutcome run() {
    settings_ = checkpoint_settings_of(job_.spec, options_.state_dir);
    restart_ = restart_settings_of(job_.spec, settings_.interval.count() > 0);
    if (settings_.interval.count() > 0)
      lock_ = std::make_unique<CheckpointDirLock>(settings_.root, job_.spec.file.string());
    if (!options_.restore.empty()) check_restore(options_.restore, job_.spec, options_.allow_non_restored_state);
    restore_from_ = options_.restore;

    registration_ = std::make_unique<JobRegistration>(options_.state_dir, job_.spec, options_.reuse_job_id);
    outcome_.job_id = registration_->id();
    spool_janitor_ = std::make_unique<SpoolJanitor>(settings_.root, outcome_.job_id, log_);
    registration_->write_pipeline(job_.text, job_.overrides);
    clear_final_publish(registration_->dir());
    registration_->write_run_options({{"transport", options_.transport},
                                      {"savepoint_on_exit", options_.savepoint_on_exit ? "1" : "0"},
                                      {"allow_non_restored_state", options_.allow_non_restored_state ? "1" : "0"},
                                      {"max_workers", std::to_string(options_.worker_limits.per_job)},
                                      {"max_host_workers", std::to_string(options_.worker_limits.per_host)}});
    if (options_.on_registered) options_.on_registered(outcome_.job_id, registration_->dir());

    control_endpoint_ = control_.bind(options_.transport, registration_->socket_dir());
    registration_->set_control_endpoint(control_endpoint_);
    std::optional<std::filesystem::path> latest;
    if (!restore_from_.empty()) latest = restore_from_;
    checkpoints_ = std::make_unique<CheckpointCoordinator>(job_, settings_, outcome_.job_id, latest, workers_,
                                                           control_, *spool_janitor_, static_cast<CheckpointListener&>(*this), log_);
    commands_ = std::make_unique<ClientCommands>(job_, options_.worker_limits, workers_, *checkpoints_, control_,
                                                 static_cast<JobControl&>(*this), log_);

    for (;;) {
      launch();
      if (rescale_to_ && !ended_) {
        rescale();
        continue;
      }
      if (restart_pending_ && !ended_ && restart()) continue;
      break;
    }
    // No worker is left to write into a checkpoint: one that failed leaves no chk-N behind.
    if (lock_) checkpoints_->prune();
    spool_janitor_->sweep_ended();
    finish_registration();
    return outcome_;
  }

private:
  // Starts this attempt's workers and runs the job until it ends or must restart.
  void launch() {
    checkpoints_->begin_attempt(restore_from_);
    AttemptArgs args;
    args.job_dir = registration_->dir();
    args.socket_dir = registration_->socket_dir();
    args.control_endpoint = control_endpoint_;
    args.transport = options_.transport;
    args.attempt = attempt_;
    args.restore = restore_from_;
    if (checkpoints_->enabled()) {
      args.spool_dir = spool_janitor_->dir();
      args.run_tag = outcome_.job_id;
    }
    args.log_flags = options_.worker_log_flags;
    workers_.start(job_, args);
    registration_->update("running", workers_.pids());
    log_.info("job {} started: {} worker(s){}", outcome_.job_id, workers_.size(),
              restore_from_.empty() ? std::string() : ", restored from " + restore_from_.string());
    if (!await_ready()) return;
    start_data_flow();
    supervise();
  }

  // The savepoint of a rescale is complete and the workers are gone: start the new plan from
  // it (SPEC §7: state redistributed by key group). The job keeps its id.
  void rescale() {
    workers_.clear(); // they point into the old plan
    job_ = std::move(*rescale_to_);
    rescale_to_.reset();
    ++attempt_;
    restore_from_ = *checkpoints_->latest_completed();
    registration_->write_pipeline(job_.text, job_.overrides);
    log_.info("rescaling: restarting with {} from {}", describe_parallelism(job_.spec), restore_from_.string());
  }

  // After a failure: every worker goes, and after the strategy's delay the job starts again
  // from its latest completed checkpoint (SPEC §7). False when the job ended meanwhile.
  bool restart() {
    restart_pending_ = false;
    workers_.cancel_all();
    workers_.clear();
    ++attempt_;
    ++restarts_;
    if (const auto& latest = checkpoints_->latest_completed()) restore_from_ = *latest;
    spool_janitor_->sweep_live(restore_from_);
    auto delay = restart_.delay_before(restarts_);
    log_.warn("restarting the job (attempt {} of {}) in {} ms from {}: {}", restarts_, restart_.max_attempts,
              delay.count(), restore_from_.empty() ? std::string("the beginning") : restore_from_.string(),
              last_failure_);
    registration_->update("restarting", workers_.pids());
    restarting_ = true;
    auto until = Clock::now() + delay;
    while (Clock::now() < until && !ended_ && !stopping_)
      poll_once(std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()) + 1ms);
    restarting_ = false;
    if (stopping_ && !ended_) {
      // Stopped while waiting to restart: there is nothing running to drain.
      final_state_ = "stopped";
      ended_ = true;
    }
    return !ended_;
  }

  // Every worker binds its input and says where; false when the job ended first.
  bool await_ready() {
    auto deadline = Clock::now() + kStartupTimeout;
    while (!workers_.all_ready()) {
      if (Clock::now() > deadline) {
        task_failed("workers did not start within " + std::to_string(kStartupTimeout.count()) + "s", true);
        return false;
      }
      if (!poll_once(200ms)) return false;
    }
    return true;
  }

  void start_data_flow() {
    transport::ControlMessage start{"START", {}};
    if (options_.savepoint_on_exit) start.set("at_end", "savepoint");
    for (const auto& t : workers_.tasks())
      if (!t.endpoint.empty()) start.set("endpoint." + std::to_string(t.task->id), t.endpoint);
    workers_.send_all(start);
    log_.info("all {} worker(s) ready: records flowing", workers_.size());
    checkpoints_->data_flowing(Clock::now());
    if (!rescale_client_.empty()) {
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - rescale_halted_).count();
      log_.info("rescaled in {} ms (from the savepoint that stopped the sources to records flowing again)", ms);
      control_.send(rescale_client_, transport::ControlMessage{"OK", {}}
                                         .set("path", restore_from_.string())
                                         .set("parallelism", describe_parallelism(job_.spec))
                                         .set("downtime_ms", std::to_string(ms)));
      rescale_client_.clear();
    }
    // A STOP sent before a worker had connected was dropped by the ROUTER: say it again.
    if (stopping_) workers_.send_all(transport::ControlMessage{"STOP", {}});
  }

  void supervise() {
    auto next_progress = Clock::now() + kProgressEvery;
    while (!workers_.all_finished()) {
      if (!poll_once(until_next_duty())) return;
      auto now = Clock::now();
      check_heartbeats(now);
      checkpoints_->maybe_trigger(now, stopping_);
      checkpoints_->check_timeout(now);
      if (interrupted()) return;
      if (now >= next_progress) {
        log_.info("progress: {}", describe_totals());
        next_progress += kProgressEvery;
      }
    }
    finish();
  }

  // Every task said FINISHED, so every end of input has been read. The sinks now publish
  // what no snapshot covers: that must be on disk first, so that no restart and no --resume
  // runs the job again (final_publish.hpp).
  void finish() {
    if (auto ok = mark_finishing(registration_->dir(), workers_.size()); !ok) {
      fail("cannot record that the job publishes its final output: " + ok.error());
      return;
    }
    if (auto ok = mark_drained(settings_.root); !ok) log_.warn("{}", ok.error());
    std::vector<std::string> unpublished = workers_.release();
    if (!unpublished.empty()) {
      // A sink that could not publish the job's last output (stdout on a full disk, say):
      // that output is incomplete, and neither a restart nor --resume may take the job for
      // finished. Not retried: the sinks may have published part of it already.
      auto [reasons, reader_gone] = final_failure_reasons();
      if (reader_gone) {
        // Like `yes | head`: the reader has what it wanted; end quietly, as SIGPIPE would.
        log_.info("the reader of stdout has gone: stopping the job");
        outcome_.exit_code = exit_code_for(ErrorKind::OutputClosed);
        fail("");
        return;
      }
      fail("the final output of " + pipeline::detail::join(unpublished, ", ") + " could not be published" +
           (reasons.empty() ? std::string() : ": " + reasons) + "; it may be incomplete");
      return;
    }
    for (const auto& t : workers_.tasks()) log_.debug("{}: {}", t.label, encode_metrics(t.metrics));
    log_.info("job {} finished: {}", outcome_.job_id, describe_totals());
    spool_janitor_->sweep_drained();
  }

  // The reasons of the FAILED messages of this attempt waiting on the control socket, read
  // without acting on them (after RELEASE a failure is not restarted), and whether every one
  // of them says that the reader of stdout has gone.
  std::pair<std::string, bool> final_failure_reasons() {
    std::vector<std::string> reasons;
    bool reader_gone = false;
    bool other = false;
    while (auto in = control_.receive()) {
      const auto& m = in->message;
      if (!m || m->type != "FAILED" || m->get_int("attempt", -1) != attempt_) continue;
      reasons.push_back(m->get("message") + " (in " + m->get("chain") + ")");
      (m->get("kind") == "output_closed" ? reader_gone : other) = true;
    }
    return {pipeline::detail::join(reasons, "; "), reader_gone && !other};
  }

  // Handles what arrives within `timeout`. Returns false when the job has ended.
  bool poll_once(std::chrono::milliseconds timeout) {
    zmq::pollitem_t items[] = {{control_.handle(), 0, ZMQ_POLLIN, 0}, {nullptr, signals_.fd(), ZMQ_POLLIN, 0}};
    zmq::poll(items, 2, std::max(timeout, 0ms));
    if (items[0].revents & ZMQ_POLLIN)
      while (auto in = control_.receive()) {
        dispatch(*in);
        if (interrupted()) return false;
      }
    if (items[1].revents & ZMQ_POLLIN)
      while (int sig = signals_.next()) {
        handle_signal(sig);
        if (interrupted()) return false;
      }
    return !interrupted();
  }

  // What waits on the control socket, until the running attempt must end.
  void drain_messages() {
    while (!interrupted()) {
      auto in = control_.receive();
      if (!in) break;
      dispatch(*in);
    }
  }

  void dispatch(const ControlChannel::Incoming& in) {
    if (!in.message) return;
    if (ClientCommands::is_client_command(*in.message)) commands_->handle(in.identity, *in.message);
    else handle_message(*in.message);
  }

  // The running attempt must end: the job ended, or restarts (failure, rescale).
  bool interrupted() const { return ended_ || restart_pending_ || rescale_to_.has_value(); }

  std::chrono::milliseconds until_next_duty() const {
    auto now = Clock::now();
    auto next = checkpoints_->next_duty(now + 1000ms);
    return std::max(0ms, std::chrono::duration_cast<std::chrono::milliseconds>(next - now) + 1ms);
  }

  // A message of a worker of the running attempt (older attempts' are dropped).
  void handle_message(const transport::ControlMessage& m) {
    auto index = workers_.sender_of(m);
    if (!index) return;
    TaskRuntime& t = workers_[*index];
    t.last_seen = Clock::now();
    if (m.type == "READY") {
      t.ready = true;
      t.endpoint = m.get("endpoint");
    } else if (m.type == "HEARTBEAT") {
      t.metrics = decode_metrics(m.get("metrics"));
    } else if (m.type == "FINISHED") {
      t.finished = true;
      t.metrics = decode_metrics(m.get("metrics"));
      // A finished task takes no more checkpoints; the end of the job commits everything.
      checkpoints_->abort_pending(t.label + " finished its input first", false);
    } else if (m.type == "ACK") {
      checkpoints_->on_ack(*index, m);
    } else if (m.type == "DECLINE") {
      checkpoints_->on_decline(t, m);
    } else if (m.type == "EXHAUSTED") {
      checkpoints_->on_source_exhausted();
    } else if (m.type == "FAILED" && m.get("kind") == "output_closed") {
      // Like `yes | head`: the reader has what it wanted; end quietly, as SIGPIPE would.
      log_.info("the reader of stdout has gone: stopping the job");
      outcome_.exit_code = exit_code_for(ErrorKind::OutputClosed);
      fail("");
    } else if (m.type == "FAILED" && m.get("kind") == "snapshot") {
      outcome_.exit_code = exit_code_for(ErrorKind::Snapshot);
      fail(m.get("message") + " (in " + m.get("chain") + ")");
    } else if (m.type == "FAILED" && m.get("kind") == "usage") {
      // A pipeline error (a dead-letter file that cannot be opened): every restart would meet
      // it again, so it is never retried.
      outcome_.exit_code = exit_code_for(ErrorKind::Usage);
      fail(m.get("message") + " (in " + m.get("chain") + ")");
    } else if (m.type == "FAILED") {
      task_failed(m.get("message") + " (in " + m.get("chain") + ")", true);
    }
  }

  void handle_signal(int sig) {
    if (sig == SIGCHLD) {
      reap_children();
      return;
    }
    ++signals_received_;
    int code = sig == SIGINT ? 130 : 143;
    if (signals_received_ > 1) {
      log_.warn("{} received again: cancelling the job", ::strsignal(sig));
      outcome_.exit_code = code;
      workers_.cancel_all();
      final_state_ = "cancelled";
      ended_ = true;
      return;
    }
    outcome_.exit_code = code;
    if (can_stop_at_checkpoint()) {
      // SPEC §2: sinks commit what the last completed checkpoint covers. Draining instead
      // would publish output that no checkpoint covers, and a later --resume from the last
      // checkpoint would publish it again.
      log_.warn("{} received: taking a last checkpoint, then stopping (send it again to cancel)", ::strsignal(sig));
      checkpoints_->abort_pending("the job is stopping", false);
      // at_end: if it fails, drain.
      if (!checkpoints_->trigger({.dir = checkpoints_->next_checkpoint_dir(), .stop_after = true, .at_end = true}))
        request_stop();
      return;
    }
    log_.warn("{} received: stopping the job gracefully (send it again to cancel)", ::strsignal(sig));
    request_stop();
  }

  // A job that takes checkpoints, with every task running, stops at a last checkpoint.
  bool can_stop_at_checkpoint() const {
    return checkpoints_->enabled() && !stopping_ && !interrupted() && !checkpoints_->savepoint_in_progress() &&
           !workers_.empty() && workers_.all_running() && checkpoints_->exhausted_sources() == 0;
  }

  void reap_children() {
    while (auto child = workers_.reap_next()) {
      TaskRuntime* t = child->task;
      if (!t) continue;
      int status = t->process->status();
      bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if ((t->finished && clean) || ended_) continue;
      // A FAILED message, if the worker managed to send one, is the better reason.
      drain_messages();
      if (!ended_ && !(t->finished && clean))
        task_failed("worker for " + t->label + " (pid " + std::to_string(child->pid) + ") " +
                        t->process->describe_exit(),
                    true);
    }
  }

  void check_heartbeats(Clock::time_point now) {
    TaskRuntime* t = workers_.silent_worker(now, restart_.heartbeat_timeout);
    if (!t) return;
    auto silent = std::chrono::duration_cast<std::chrono::seconds>(now - t->last_seen).count();
    t->process->kill_and_reap();
    task_failed("worker for " + t->label + " (pid " + std::to_string(t->process->pid()) + ") sent no heartbeat for " +
                    std::to_string(silent) + " s",
                true);
  }

  // A task failed or its worker died: restart per [restart], or fail the job.
  void task_failed(std::string reason, bool restartable) {
    if (ended_ || restart_pending_) return;
    bool strategy = restart_.strategy != "none";
    if (restartable && strategy && !stopping_ && restarts_ < restart_.max_attempts) {
      checkpoints_->abort_pending("a task failed", false);
      last_failure_ = std::move(reason);
      restart_pending_ = true;
      return;
    }
    if (restartable && strategy && restarts_ >= restart_.max_attempts)
      reason += " (after " + std::to_string(restarts_) + " restart(s): [restart] max_attempts reached)";
    fail(reason);
  }

  void fail(const std::string& reason) {
    if (ended_) return;
    if (!rescale_client_.empty()) {
      control_.send(rescale_client_, transport::ControlMessage{"ERROR", {}}.set("message", "the job failed: " + reason));
      rescale_client_.clear();
    }
    outcome_.error = reason;
    if (outcome_.exit_code == 0) outcome_.exit_code = 1;
    final_state_ = "failed";
    workers_.cancel_all();
    ended_ = true;
  }

  // Sources end their input as if it were exhausted, so the job drains and commits.
  void request_stop() {
    if (stopping_) return;
    stopping_ = true;
    workers_.send_all(transport::ControlMessage{"STOP", {}});
  }

  std::string describe_totals() const {
    JobTotals totals = sum_metrics(job_.spec, workers_.metrics());
    double seconds = std::chrono::duration<double>(Clock::now() - started_).count();
    char rate[32];
    std::snprintf(rate, sizeof rate, "%.0f", seconds > 0 ? static_cast<double>(totals.read) / seconds : 0.0);
    return std::to_string(totals.read) + " records read, " + std::to_string(totals.written) + " written, " +
           std::to_string(totals.bad) + " bad, " + rate + " records/s read";
  }

  void finish_registration() {
    if (final_state_.empty()) final_state_ = stopping_ ? "stopped" : "finished";
    registration_->update(final_state_, workers_.pids());
    registration_->remove_sockets();
  }

  // CheckpointListener
  void checkpoint_completed(const std::filesystem::path& dir) override {
    registration_->set_last_checkpoint(dir.string());
    registration_->update("running", workers_.pids());
  }
  void rescale_ready(LoadedJob next, const std::string& client, Clock::time_point halted) override {
    rescale_halted_ = halted;
    rescale_to_ = std::move(next);
    rescale_client_ = client;
  }
  void stopped_at(const std::filesystem::path& snapshot) override {
    outcome_.savepoint = snapshot;
    final_state_ = "stopped";
    ended_ = true;
    bool savepoint = snapshot.filename().string().rfind("savepoint-", 0) == 0;
    log_.info("job {} stopped with {} {}", outcome_.job_id, savepoint ? "savepoint" : "checkpoint", snapshot.string());
  }
  void drain_instead() override { request_stop(); }

  // JobControl
  std::string state() const override {
    return restart_pending_ || restarting_ ? "restarting" : stopping_ ? "stopping" : "running";
  }
  int restarts() const override { return restarts_; }
  bool stopping_or_restarting() const override { return stopping_ || restart_pending_ || restarting_; }
  void drain() override { request_stop(); }
  void cancel(const std::string& reason) override {
    outcome_.exit_code = 1;
    outcome_.error = reason;
    workers_.cancel_all();
    final_state_ = "cancelled";
    ended_ = true;
  }

  LoadedJob job_; // replaced by a rescale; the collaborators hold a reference to it
  const RunOptions& options_;
  spdlog::logger& log_;
  CheckpointSettings settings_;
  RestartSettings restart_;
  std::unique_ptr<CheckpointDirLock> lock_;
  std::unique_ptr<JobRegistration> registration_;
  std::unique_ptr<SpoolJanitor> spool_janitor_;
  // Before the control channel: ZeroMQ's threads, started with its socket, inherit this
  // thread's signal mask, so they must find SIGINT, SIGTERM and SIGCHLD blocked already.
  SignalChannel signals_;
  std::unique_ptr<Launcher> launcher_; // the lead chooses by [cluster] launcher
  ControlChannel control_;
  WorkerPool workers_;
  std::unique_ptr<CheckpointCoordinator> checkpoints_;
  std::unique_ptr<ClientCommands> commands_;
  std::string control_endpoint_;
  int attempt_ = 0;  // every start of workers: restarts and rescales; tells old messages apart
  int restarts_ = 0; // restarts after failures, counted against [restart] max_attempts
  bool restart_pending_ = false;
  bool restarting_ = false; // waiting out the restart delay, no workers
  std::string last_failure_;
  std::filesystem::path restore_from_; // what the running attempt started from
  std::optional<LoadedJob> rescale_to_;
  std::string rescale_client_;
  Clock::time_point rescale_halted_{};
  RunOutcome outcome_;
  std::string final_state_;
  Clock::time_point started_ = Clock::now();
  int signals_received_ = 0;
  bool stopping_ = false;
  bool ended_ = false;
};

} // namespace

RunOutcome run_job(const LoadedJob& job, const RunOptions& options, spdlog::logger& log) {
  Coordinator coordinator(job, options, log);
  return coordinator.run();
}

} // namespace streamctl::runtime
