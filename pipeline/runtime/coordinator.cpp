#include "pipeline/runtime/coordinator.hpp"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <optional>
#include <fstream>
#include <map>
#include <random>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include <zmq.hpp>


#include "operators/registry.hpp"
#include "operators/wall_clock.hpp"
#include "pipeline/runtime/checkpoint_dir_lock.hpp"
#include "pipeline/runtime/checkpoint_restore.hpp"
#include "pipeline/runtime/checkpoint_settings.hpp"
#include "pipeline/runtime/child_process.hpp"
#include "pipeline/runtime/final_publish.hpp"
#include "pipeline/runtime/job_metrics.hpp"
#include "pipeline/runtime/host_limits.hpp"
#include "pipeline/runtime/job_registry.hpp"
#include "pipeline/runtime/local_launcher.hpp"
#include "pipeline/runtime/signal_channel.hpp"
#include "pipeline/runtime/spool_janitor.hpp"
#include "state/error.hpp"
#include "state/json_writer.hpp"
#include "transport/control.hpp"

namespace streamctl::runtime {

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr auto kStartupTimeout = 60s;
constexpr auto kCancelGrace = 2s;
constexpr auto kProgressEvery = 10s;
constexpr auto kHaltGrace = 10s;

std::string utc_stamp() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
  return buf;
}


struct TaskRuntime {
  const pipeline::Task* task = nullptr;
  std::string label; // "clicks -> ok[1]"
  std::unique_ptr<ChildProcess> process;
  std::string endpoint;
  bool ready = false;
  bool finished = false;
  Clock::time_point last_seen;
  std::vector<NodeMetrics> metrics;
};

// A checkpoint or savepoint the sources have been told to take, until every task has
// acknowledged its snapshot file (then _metadata completes it) or it is given up.
struct PendingCheckpoint {
  std::uint64_t id = 0;
  std::filesystem::path dir;
  bool savepoint = false;
  bool stop_after = false;     // halt the job once it completes (stop, --savepoint-on-exit)
  bool at_end = false;         // taken because the input ended (--savepoint-on-exit)
  std::optional<LoadedJob> rescaled; // a rescale: the job to start from it once it completes
  std::string client;          // the ROUTER identity of the `savepoint`/`stop` awaiting the path
  Clock::time_point started;
  Clock::time_point deadline;
  std::vector<std::optional<CheckpointTaskFile>> files; // by task
  std::size_t acked = 0;
};

class Coordinator {
public:
  Coordinator(const LoadedJob& job, const RunOptions& options, spdlog::logger& log)
      : job_(job), options_(options), launcher_(std::make_unique<LocalLauncher>(options.self_executable)), log_(log),
        control_(context_, zmq::socket_type::router) {}

  ~Coordinator() {
    // An exception ended run() before job.json was written (cannot bind, cannot fork): keep a
    // record of the job whose id `run --detach` printed; otherwise its directory goes.
    if (registration_ && options_.on_registered && !registration_->published()) {
      try {
        registration_->update("failed", {});
      } catch (const std::exception&) {
      }
    }
    tasks_.clear(); // kills and reaps any worker still running
    control_.close();
  }

  RunOutcome run() {
    checkpoints_ = checkpoint_settings_of(job_.spec, options_.state_dir);
    restart_ = restart_settings_of(job_.spec, checkpoints_.interval.count() > 0);
    if (checkpoints_.interval.count() > 0) lock_ = std::make_unique<CheckpointDirLock>(checkpoints_.root, job_.spec.file.string());
    if (!options_.restore.empty()) check_restore(options_.restore);
    restore_from_ = options_.restore;
    if (!restore_from_.empty()) latest_completed_ = restore_from_;

    registration_ = std::make_unique<JobRegistration>(options_.state_dir, job_.spec, options_.reuse_job_id);
    outcome_.job_id = registration_->id();
    spool_janitor_ = std::make_unique<SpoolJanitor>(checkpoints_.root, outcome_.job_id, log_);
    registration_->write_pipeline(job_.text, job_.overrides);
    clear_final_publish(registration_->dir());
    registration_->write_run_options({{"transport", options_.transport},
                                      {"savepoint_on_exit", options_.savepoint_on_exit ? "1" : "0"},
                                      {"allow_non_restored_state", options_.allow_non_restored_state ? "1" : "0"},
                                      {"max_workers", std::to_string(options_.worker_limits.per_job)},
                                      {"max_host_workers", std::to_string(options_.worker_limits.per_host)}});
    if (options_.on_registered) options_.on_registered(outcome_.job_id, registration_->dir());

    control_.set(zmq::sockopt::linger, 0);
    control_.set(zmq::sockopt::router_mandatory, true);
    // A restarted worker reuses its task's identity while the dead one's pipe may linger.
    control_.set(zmq::sockopt::router_handover, true);
    std::string bind = options_.transport == "tcp"
                           ? std::string("tcp://127.0.0.1:*")
                           : "ipc://" + (registration_->socket_dir() / "control.sock").string();
    control_.bind(bind);
    control_endpoint_ = control_.get(zmq::sockopt::last_endpoint);
    registration_->set_control_endpoint(control_endpoint_);
    next_checkpoint_id_ = next_checkpoint_id(checkpoints_.root);

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
    if (lock_)
      for (const auto& p : prune_checkpoints(checkpoints_.root, checkpoints_.retain, std::nullopt)) log_.warn("{}", p);
    spool_janitor_->sweep_ended();
    finish_registration();
    return outcome_;
  }

private:
  // Starts this attempt's workers and runs the job until it ends or must restart.
  void launch() {
    start_workers(control_endpoint_);
    registration_->update("running", pids());
    log_.info("job {} started: {} worker(s){}", outcome_.job_id, tasks_.size(),
              restore_from_.empty() ? std::string() : ", restored from " + restore_from_.string());
    if (await_ready() && start_data_flow()) supervise();
  }

  // The restore a job starts from must fit its pipeline (SPEC §7): refused with exit 3.
  void check_restore(const std::filesystem::path& path) {
    auto restore = CheckpointRestore::open(path);
    if (!restore) throw Error(ErrorKind::Snapshot, restore.error());
    // Every segment's checksums, before anything starts: a damaged file is refused here with
    // exit 3, not found by a worker half-way through its restore.
    if (auto ok = restore->verify(); !ok) throw Error(ErrorKind::Snapshot, ok.error());
    auto problems = check_restore_compatible(*restore, job_.spec, options_.allow_non_restored_state);
    if (!problems.empty()) {
      std::string text;
      for (const auto& p : problems) text += (text.empty() ? "" : "\n") + p;
      throw Error(ErrorKind::Snapshot, text);
    }
  }

  // The savepoint of a rescale is complete and the workers are gone: start the new plan from
  // it (SPEC §7: state redistributed by key group). The job keeps its id.
  void rescale() {
    tasks_.clear(); // they point into the old plan
    job_ = std::move(*rescale_to_);
    rescale_to_.reset();
    ++attempt_;
    exhausted_sources_ = 0;
    restore_from_ = *latest_completed_;
    registration_->write_pipeline(job_.text, job_.overrides);
    rescale_started_ = Clock::now();
    log_.info("rescaling: restarting with {} from {}", describe_parallelism(), restore_from_.string());
  }

  std::string describe_parallelism() const {
    std::string out;
    for (const auto& node : job_.spec.nodes)
      out += (out.empty() ? "" : ", ") + node.name + "=" + std::to_string(job_.spec.parallelism_of(node));
    return out;
  }

  // After a failure: every worker goes, and after the strategy's delay the job starts again
  // from its latest completed checkpoint (SPEC §7). False when the job ended meanwhile.
  bool restart() {
    restart_pending_ = false;
    cancel_all();
    tasks_.clear();
    ++attempt_;
    ++restarts_;
    exhausted_sources_ = 0;
    if (latest_completed_) restore_from_ = *latest_completed_;
    spool_janitor_->sweep_live(restore_from_);
    auto delay = restart_.delay_before(restarts_);
    log_.warn("restarting the job (attempt {} of {}) in {} ms from {}: {}", restarts_, restart_.max_attempts,
              delay.count(), restore_from_.empty() ? std::string("the beginning") : restore_from_.string(),
              last_failure_);
    registration_->update("restarting", pids());
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

  void start_workers(const std::string& control_endpoint) {
    for (const auto& task : job_.plan.tasks) {
      const pipeline::Chain& chain = job_.plan.chains[static_cast<std::size_t>(task.chain)];
      TaskRuntime rt;
      rt.task = &task;
      rt.label = pipeline::chain_label(job_.spec, chain) + "[" + std::to_string(task.subtask) + "]";
      WorkerLaunch launch;
      launch.task = task.id;
      launch.label = rt.label;
      launch.worker_args = {"--job-dir", registration_->dir().string(),
                            "--base-dir", job_.spec.base_dir.string(),
                            "--file-name", job_.spec.file.string(),
                            "--socket-dir", registration_->socket_dir().string(),
                            "--task", std::to_string(task.id),
                            "--coordinator", control_endpoint,
                            "--transport", options_.transport,
                            "--attempt", std::to_string(attempt_)};
      auto& args = launch.worker_args;
      if (!restore_from_.empty()) args.insert(args.end(), {"--restore", restore_from_.string()});
      if (checkpoints_.interval.count() > 0)
        args.insert(args.end(), {"--spool-dir", spool_janitor_->dir().string(), "--run-tag", outcome_.job_id});
      args.insert(args.end(), options_.worker_log_flags.begin(), options_.worker_log_flags.end());
      const pipeline::NodeSpec& head = job_.spec.nodes[chain.nodes.front()];
      launch.inherit_stdin = head.role == pipeline::NodeRole::Source && head.type == "stdin";
      rt.process = launcher_->start(launch);
      rt.last_seen = Clock::now();
      tasks_.push_back(std::move(rt));
    }
  }

  std::map<std::string, int> pids() const {
    std::map<std::string, int> out;
    for (const auto& t : tasks_) out[t.label] = t.process->running() ? t.process->pid() : 0; // 0: exited
    return out;
  }

  // Every worker binds its input and says where; false when the job ended first.
  bool await_ready() {
    auto deadline = Clock::now() + kStartupTimeout;
    while (!all_of([](const TaskRuntime& t) { return t.ready; })) {
      if (Clock::now() > deadline) {
        task_failed("workers did not start within " + std::to_string(kStartupTimeout.count()) + "s", true);
        return false;
      }
      if (!poll_once(200ms)) return false;
    }
    return true;
  }

  bool start_data_flow() {
    transport::ControlMessage start{"START", {}};
    if (options_.savepoint_on_exit) start.set("at_end", "savepoint");
    for (const auto& t : tasks_)
      if (!t.endpoint.empty()) start.set("endpoint." + std::to_string(t.task->id), t.endpoint);
    for (const auto& t : tasks_) send(t, start);
    log_.info("all {} worker(s) ready: records flowing", tasks_.size());
    next_trigger_ = Clock::now() + checkpoints_.interval;
    if (!rescale_client_.empty()) {
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - rescale_halted_).count();
      log_.info("rescaled in {} ms (from the savepoint that stopped the sources to records flowing again)", ms);
      reply(rescale_client_, transport::ControlMessage{"OK", {}}
                                 .set("path", restore_from_.string())
                                 .set("parallelism", describe_parallelism())
                                 .set("downtime_ms", std::to_string(ms)));
      rescale_client_.clear();
    }
    // A STOP sent before a worker had connected was dropped by the ROUTER: say it again.
    if (stopping_) {
      transport::ControlMessage stop{"STOP", {}};
      for (const auto& t : tasks_) send(t, stop);
    }
    return true;
  }

  void supervise() {
    auto next_progress = Clock::now() + kProgressEvery;
    while (!all_of([](const TaskRuntime& t) { return t.finished; })) {
      if (!poll_once(until_next_duty())) return;
      auto now = Clock::now();
      check_heartbeats(now);
      maybe_trigger_checkpoint(now);
      check_checkpoint_timeout(now);
      if (interrupted()) return;
      if (now >= next_progress) {
        log_.info("progress: {}", describe_totals());
        next_progress += kProgressEvery;
      }
    }
    // Every task said FINISHED, so every end of input has been read. The sinks now publish
    // what no snapshot covers: that must be on disk first, so that no restart and no --resume
    // runs the job again (final_publish.hpp).
    if (auto ok = mark_finishing(registration_->dir(), tasks_.size()); !ok) {
      fail("cannot record that the job publishes its final output: " + ok.error());
      return;
    }
    if (auto ok = mark_drained(checkpoints_.root); !ok) log_.warn("{}", ok.error());
    // Let the workers go, and wait for them to exit so that their output is flushed.
    transport::ControlMessage release{"RELEASE", {}};
    for (const auto& t : tasks_) send(t, release);
    std::vector<std::string> unpublished;
    for (auto& t : tasks_) {
      if (!t.process->running()) continue;
      int status = 0;
      if (::waitpid(t.process->pid(), &status, 0) != t.process->pid()) continue;
      t.process->reaped(status);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) unpublished.push_back(t.label);
    }
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
      fail("the final output of " + joined(unpublished, ", ") + " could not be published" +
           (reasons.empty() ? std::string() : ": " + reasons) + "; it may be incomplete");
      return;
    }
    for (const auto& t : tasks_) log_.debug("{}: {}", t.label, encode_metrics(t.metrics));
    log_.info("job {} finished: {}", outcome_.job_id, describe_totals());
    spool_janitor_->sweep_drained();
  }

  static std::string joined(const std::vector<std::string>& items, const char* separator) {
    std::string out;
    for (const auto& item : items) out += (out.empty() ? "" : separator) + item;
    return out;
  }

  // The reasons of the FAILED messages of this attempt waiting on the control socket, read
  // without acting on them (after RELEASE a failure is not restarted), and whether every one
  // of them says that the reader of stdout has gone.
  std::pair<std::string, bool> final_failure_reasons() {
    std::vector<std::string> reasons;
    bool reader_gone = false;
    bool other = false;
    zmq::message_t identity, body;
    while (control_.recv(identity, zmq::recv_flags::dontwait)) {
      if (!control_.recv(body, zmq::recv_flags::dontwait)) break;
      auto m = transport::decode_control(body.to_string_view());
      if (!m || m->type != "FAILED" || m->get_int("attempt", -1) != attempt_) continue;
      reasons.push_back(m->get("message") + " (in " + m->get("chain") + ")");
      (m->get("kind") == "output_closed" ? reader_gone : other) = true;
    }
    return {joined(reasons, "; "), reader_gone && !other};
  }

  // Handles what arrives within `timeout`. Returns false when the job has ended.
  bool poll_once(std::chrono::milliseconds timeout) {
    zmq::pollitem_t items[] = {{control_.handle(), 0, ZMQ_POLLIN, 0}, {nullptr, signals_.fd(), ZMQ_POLLIN, 0}};
    zmq::poll(items, 2, std::max(timeout, 0ms));
    if (items[0].revents & ZMQ_POLLIN) {
      zmq::message_t identity, body;
      while (control_.recv(identity, zmq::recv_flags::dontwait)) {
        if (!control_.recv(body, zmq::recv_flags::dontwait)) break;
        auto message = transport::decode_control(body.to_string_view());
        if (message && is_client_command(*message)) handle_client(identity.to_string(), *message);
        else if (message) handle_message(*message);
        if (interrupted()) return false;
      }
    }
    if (items[1].revents & ZMQ_POLLIN)
      while (int sig = signals_.next()) {
        handle_signal(sig);
        if (interrupted()) return false;
      }
    return !interrupted();
  }

  // The running attempt must end: the job ended, or restarts (failure, rescale).
  bool interrupted() const { return ended_ || restart_pending_ || rescale_to_.has_value(); }

  std::chrono::milliseconds until_next_duty() const {
    auto now = Clock::now();
    auto next = now + 1000ms;
    if (checkpoints_.interval.count() > 0 && !pending_) next = std::min(next, next_trigger_);
    if (pending_) next = std::min(next, pending_->deadline);
    return std::max(0ms, std::chrono::duration_cast<std::chrono::milliseconds>(next - now) + 1ms);
  }

  void handle_message(const transport::ControlMessage& m) {
    auto index = static_cast<std::size_t>(m.get_int("task", -1));
    if (index >= tasks_.size() || m.get_int("attempt", -1) != attempt_) return; // an older attempt's
    TaskRuntime& t = tasks_[index];
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
      if (pending_) abort_checkpoint(t.label + " finished its input first", false);
    } else if (m.type == "ACK") {
      on_ack(index, m);
    } else if (m.type == "DECLINE") {
      if (pending_ && static_cast<std::uint64_t>(m.get_int("checkpoint", 0)) == pending_->id)
        abort_checkpoint(t.label + " could not write its snapshot: " + m.get("message"), true);
    } else if (m.type == "EXHAUSTED") {
      on_source_exhausted();
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

  // --- Checkpoints ---

  bool is_source_task(const TaskRuntime& t) const {
    const auto& chain = job_.plan.chains[static_cast<std::size_t>(t.task->chain)];
    return job_.spec.nodes[chain.nodes.front()].role == pipeline::NodeRole::Source;
  }

  void maybe_trigger_checkpoint(Clock::time_point now) {
    if (checkpoints_.interval.count() == 0 || pending_ || stopping_ || now < next_trigger_) return;
    next_trigger_ = now + checkpoints_.interval;
    if (exhausted_sources_ > 0 || !all_of([](const TaskRuntime& t) { return !t.finished; })) return;
    trigger(checkpoints_.root / ("chk-" + std::to_string(next_checkpoint_id_)), false, false, "");
  }

  // Tells every source task to snapshot and inject barrier N; true when it went out.
  bool trigger(const std::filesystem::path& dir, bool savepoint, bool stop_after, const std::string& client) {
    std::uint64_t id = next_checkpoint_id_++;
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) {
      std::string why = "cannot create '" + dir.string() + "': " + ec.message();
      log_.error("{} {} failed: {}; the job goes on", savepoint ? "savepoint" : "checkpoint", id, why);
      if (!client.empty()) reply(client, transport::ControlMessage{"ERROR", {}}.set("message", why));
      return false;
    }
    PendingCheckpoint p;
    p.id = id;
    p.dir = dir;
    p.savepoint = savepoint;
    p.stop_after = stop_after;
    p.client = client;
    p.started = Clock::now();
    p.deadline = p.started + checkpoints_.timeout;
    p.files.resize(tasks_.size());
    pending_ = std::move(p);
    transport::ControlMessage message{"TRIGGER", {}};
    message.set("checkpoint", std::to_string(id)).set("dir", dir.string()).set("stop", stop_after ? "1" : "0");
    for (const auto& t : tasks_)
      if (is_source_task(t)) send(t, message);
    log_.debug("{} {} triggered into {}", savepoint ? "savepoint" : "checkpoint", id, dir.string());
    return true;
  }

  void on_ack(std::size_t index, const transport::ControlMessage& m) {
    if (!pending_ || static_cast<std::uint64_t>(m.get_int("checkpoint", 0)) != pending_->id) return;
    if (pending_->files[index]) return;
    const TaskRuntime& t = tasks_[index];
    const auto& chain = job_.plan.chains[static_cast<std::size_t>(t.task->chain)];
    CheckpointTaskFile f;
    f.file = m.get("file");
    for (std::size_t n : chain.nodes) f.nodes.push_back(job_.spec.nodes[n].name);
    f.subtask = t.task->subtask;
    f.parallelism = chain.parallelism;
    f.bytes = static_cast<std::uint64_t>(m.get_int("bytes", 0));
    f.spool_files = decode_spool_files(m.get("spool_files"));
    pending_->files[index] = std::move(f);
    if (++pending_->acked == tasks_.size()) complete_checkpoint();
  }

  // Every task's file is durable: _metadata, written last, makes the checkpoint complete;
  // then the sinks may publish what it covers (two-phase commit).
  void complete_checkpoint() {
    PendingCheckpoint p = std::move(*pending_);
    pending_.reset();
    CheckpointMetadata metadata;
    metadata.kind = p.savepoint ? "savepoint" : "checkpoint";
    metadata.job_name = job_.spec.name;
    metadata.job_id = outcome_.job_id;
    metadata.checkpoint_id = p.id;
    metadata.created_at_ms = operators::wall_clock_ms();
    metadata.max_parallelism = job_.spec.max_parallelism;
    std::uint64_t bytes = 0;
    for (auto& f : p.files) {
      bytes += f->bytes;
      metadata.tasks.push_back(std::move(*f));
    }
    if (auto ok = write_metadata(p.dir, metadata); !ok) {
      pending_ = std::move(p);
      abort_checkpoint(ok.error(), true);
      return;
    }
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - p.started).count();
    if (p.savepoint) log_.info("savepoint {} complete: {} ({} bytes, {} ms)", p.id, p.dir.string(), bytes, ms);
    else log_.debug("checkpoint {} complete: {} bytes in {} ms", p.id, bytes, ms);
    latest_completed_ = p.dir;
    ++completed_checkpoints_;
    registration_->set_last_checkpoint(p.dir.string());
    registration_->update("running", pids());
    transport::ControlMessage commit{"COMMIT", {}};
    commit.set("checkpoint", std::to_string(p.id));
    for (const auto& t : tasks_) send(t, commit);
    if (!p.savepoint)
      for (const auto& problem : prune_checkpoints(checkpoints_.root, checkpoints_.retain, std::nullopt)) log_.warn("{}", problem);
    if (!p.savepoint) spool_janitor_->sweep_live(restore_from_);
    if (p.rescaled) {
      halt_workers();
      rescale_halted_ = p.started; // the sources stopped emitting at the savepoint's barrier
      rescale_to_ = std::move(p.rescaled);
      rescale_client_ = p.client;
      return;
    }
    if (!p.client.empty()) reply(p.client, transport::ControlMessage{"OK", {}}.set("path", p.dir.string()));
    if (p.stop_after) halt(p.dir);
  }

  // The savepoint that stops the job is complete: every task ends without publishing more.
  void halt(const std::filesystem::path& snapshot) {
    halt_workers();
    outcome_.savepoint = snapshot;
    final_state_ = "stopped";
    ended_ = true;
    bool savepoint = snapshot.filename().string().rfind("savepoint-", 0) == 0;
    log_.info("job {} stopped with {} {}", outcome_.job_id, savepoint ? "savepoint" : "checkpoint", snapshot.string());
  }

  void halt_workers() {
    transport::ControlMessage halt{"HALT", {}};
    for (const auto& t : tasks_) send(t, halt);
    auto deadline = Clock::now() + kHaltGrace;
    for (auto& t : tasks_) {
      while (t.process->running() && Clock::now() < deadline) {
        int status = 0;
        if (::waitpid(t.process->pid(), &status, WNOHANG) == t.process->pid()) t.process->reaped(status);
        else std::this_thread::sleep_for(5ms);
      }
      t.process->kill_and_reap();
    }
  }

  // Gives up the pending checkpoint; the job goes on (SPEC §7). `error`: logged as an error
  // (a person should act: a full disk), else as a note.
  void abort_checkpoint(const std::string& why, bool error) {
    PendingCheckpoint p = std::move(*pending_);
    pending_.reset();
    const char* what = p.savepoint ? "savepoint" : "checkpoint";
    if (error) log_.error("{} {} failed: {}; the job goes on", what, p.id, why);
    else log_.debug("{} {} given up: {}", what, p.id, why);
    std::error_code ec;
    if (!p.savepoint || p.dir.filename().string().rfind("savepoint-", 0) == 0) std::filesystem::remove_all(p.dir, ec);
    if (!p.client.empty()) reply(p.client, transport::ControlMessage{"ERROR", {}}.set("message", what + std::string(" failed: ") + why));
    if (!p.stop_after) return;
    if (p.at_end) {
      log_.error("the {} that was to stop the job failed: draining the job instead", what);
      request_stop();
    } else {
      // The sources stopped emitting for a stop that will not happen: let them go on.
      for (const auto& t : tasks_)
        if (is_source_task(t)) send(t, transport::ControlMessage{"RESUME", {}});
    }
  }

  void check_checkpoint_timeout(Clock::time_point now) {
    if (pending_ && now >= pending_->deadline)
      abort_checkpoint("not every task acknowledged it within [checkpoint] timeout (" +
                           std::to_string(checkpoints_.timeout.count()) + " ms)",
                       true);
  }

  // --savepoint-on-exit: once every source has read all its input, a savepoint ends the run.
  void on_source_exhausted() {
    std::size_t sources = 0;
    for (const auto& t : tasks_) sources += is_source_task(t) ? 1 : 0;
    if (++exhausted_sources_ < sources) return;
    if (pending_) abort_checkpoint("the input has ended", false);
    log_.info("all input read: taking a savepoint instead of draining");
    if (trigger(default_savepoint_dir(), true, true, "")) pending_->at_end = true;
    else request_stop();
  }

  std::filesystem::path default_savepoint_dir() const {
    return checkpoints_.root / ("savepoint-" + utc_stamp() + "-" + std::to_string(next_checkpoint_id_));
  }

  void check_heartbeats(Clock::time_point now) {
    for (auto& t : tasks_) {
      if (!t.process->running() || t.finished || now - t.last_seen < restart_.heartbeat_timeout) continue;
      auto silent = std::chrono::duration_cast<std::chrono::seconds>(now - t.last_seen).count();
      t.process->kill_and_reap();
      task_failed("worker for " + t.label + " (pid " + std::to_string(t.process->pid()) + ") sent no heartbeat for " +
                      std::to_string(silent) + " s",
                  true);
      return;
    }
  }

  // A task failed or its worker died: restart per [restart], or fail the job.
  void task_failed(std::string reason, bool restartable) {
    if (ended_ || restart_pending_) return;
    bool strategy = restart_.strategy != "none";
    if (restartable && strategy && !stopping_ && restarts_ < restart_.max_attempts) {
      if (pending_) abort_checkpoint("a task failed", false);
      last_failure_ = std::move(reason);
      restart_pending_ = true;
      return;
    }
    if (restartable && strategy && restarts_ >= restart_.max_attempts)
      reason += " (after " + std::to_string(restarts_) + " restart(s): [restart] max_attempts reached)";
    fail(reason);
  }

  // Commands of `streamctl status|stop|cancel JOB`, from a DEALER that connects to the
  // control socket for one request (pipeline/runtime/job_client.hpp); workers never send them.
  static bool is_client_command(const transport::ControlMessage& m) {
    return m.type == "STATUS" || m.type == "STOP_JOB" || m.type == "CANCEL_JOB" || m.type == "SAVEPOINT" ||
           m.type == "RESCALE";
  }

  void handle_client(const std::string& identity, const transport::ControlMessage& m) {
    if (m.type == "RESCALE") {
      request_rescale(identity, m.get("overrides"));
      return; // the reply comes when the job runs at the new parallelism, or the rescale failed
    }
    if (m.type == "SAVEPOINT" || (m.type == "STOP_JOB" && m.get("drain") != "1")) {
      request_savepoint(identity, m.get("dir"), m.type == "STOP_JOB");
      return; // the reply comes when the savepoint completes or fails
    }
    transport::ControlMessage answer{"OK", {}};
    if (m.type == "STATUS") {
      answer.set("state", restart_pending_ || restarting_ ? "restarting" : stopping_ ? "stopping" : "running")
          .set("operators", status_json())
          .set("last_checkpoint", latest_completed_ ? latest_completed_->string() : "")
          .set("restarts", std::to_string(restarts_));
    } else if (m.type == "STOP_JOB") {
      log_.warn("stop requested by streamctl stop --drain: stopping the job gracefully");
      request_stop();
    }
    reply(identity, answer);
    if (m.type == "CANCEL_JOB") {
      log_.warn("cancelled by streamctl cancel");
      outcome_.exit_code = 1;
      outcome_.error = "the job was cancelled (streamctl cancel)";
      cancel_all();
      final_state_ = "cancelled";
      ended_ = true;
    }
  }

  // `streamctl rescale JOB`: `changes` are lines "parallelism=N" (the default of every node
  // without its own) or "NODE=N". Re-plans first, so that a bad request changes nothing.
  void request_rescale(const std::string& client, const std::string& changes) {
    auto refuse = [&](const std::string& why) {
      reply(client, transport::ControlMessage{"ERROR", {}}.set("message", why));
    };
    // A request that can never work (exit 2), as against a job not ready for one (exit 1).
    auto refuse_request = [&](const std::string& why) {
      reply(client, transport::ControlMessage{"ERROR", {}}.set("message", why).set("usage", "1"));
    };
    std::vector<std::string> all = job_.overrides;
    for (std::size_t start = 0; start < changes.size();) {
      auto end = changes.find('\n', start);
      if (end == std::string::npos) end = changes.size();
      std::string line = changes.substr(start, end - start);
      start = end + 1;
      auto eq = line.find('=');
      if (eq == std::string::npos) continue;
      std::string name = line.substr(0, eq);
      if (name == "parallelism") {
        all.push_back(line);
        continue;
      }
      const pipeline::NodeSpec* node = nullptr;
      for (const auto& n : job_.spec.nodes)
        if (n.name == name) node = &n;
      if (!node) return refuse_request("the job has no node '" + name + "'");
      all.push_back(std::string(pipeline::role_name(node->role)) + "s." + name + ".parallelism" + line.substr(eq));
    }
    std::optional<LoadedJob> next;
    try {
      operators::Registry registry;
      operators::register_builtin_types(registry);
      next = load_job_text(job_.text, job_.spec.file.string(), job_.spec.base_dir, all, registry);
      enforce_worker_limits(*next, options_.worker_limits);
    } catch (const Error& e) {
      return refuse_request(std::string("the new parallelism does not make a valid job:\n") + e.what());
    }
    for (const auto& node : next->spec.nodes)
      if (next->spec.parallelism_of(node) > next->spec.max_parallelism)
        return refuse_request("node '" + node.name + "': parallelism " +
                              std::to_string(next->spec.parallelism_of(node)) +
                      " is above max_parallelism " + std::to_string(next->spec.max_parallelism));
    if (auto busy = why_no_savepoint_now()) return refuse(*busy);
    if (pending_) abort_checkpoint("a rescale was requested", false);
    log_.warn("rescale requested: taking a savepoint, then restarting with the new parallelism");
    if (trigger(default_savepoint_dir(), true, true, client)) pending_->rescaled = std::move(next);
  }

  // Why a savepoint asked for now (savepoint, stop, rescale) cannot be taken, if it cannot.
  std::optional<std::string> why_no_savepoint_now() const {
    if (stopping_ || restart_pending_ || restarting_ || tasks_.empty())
      return "the job is stopping or restarting; try again";
    if (!all_of([](const TaskRuntime& t) { return t.ready && !t.finished; }))
      return "the job is starting or finishing; try again";
    if (pending_ && pending_->savepoint) return "a savepoint is already in progress";
    return std::nullopt;
  }

  // `streamctl savepoint JOB [--dir]`, and `stop JOB` (a savepoint, then the job halts).
  void request_savepoint(const std::string& client, const std::string& dir, bool stop_after) {
    auto refuse = [&](const std::string& why) {
      reply(client, transport::ControlMessage{"ERROR", {}}.set("message", why));
    };
    if (auto busy = why_no_savepoint_now()) return refuse(*busy);
    if (pending_) abort_checkpoint("a savepoint was requested", false);
    if (stop_after) log_.warn("stop requested by streamctl stop: taking a savepoint, then stopping");
    std::filesystem::path target = dir.empty() ? default_savepoint_dir()
                                               : std::filesystem::path(dir) / ("savepoint-" + utc_stamp() + "-" +
                                                                              std::to_string(next_checkpoint_id_));
    trigger(target, true, stop_after, client);
  }

  void reply(const std::string& identity, const transport::ControlMessage& m) {
    std::string body = transport::encode_control(m);
    try {
      control_.send(zmq::buffer(identity), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
      control_.send(zmq::buffer(body), zmq::send_flags::dontwait);
    } catch (const zmq::error_t&) {
      // The client went away; nothing to tell it.
    }
  }

  // SPEC §2 `status --json`'s operators: [{name, parallelism, subtasks: [{index, host, pid,
  // records_in, records_out, bad_records}]}], from the workers' latest heartbeats.
  std::string status_json() const {
    std::string out = "[";
    for (std::size_t n = 0; n < job_.spec.nodes.size(); ++n) {
      const pipeline::NodeSpec& node = job_.spec.nodes[n];
      if (n) out += ",";
      out += "{\"name\":";
      state::append_json_string(node.name, out);
      out += ",\"type\":";
      state::append_json_string(node.type, out);
      out += ",\"parallelism\":" + std::to_string(job_.spec.parallelism_of(node)) + ",\"subtasks\":[";
      bool first = true;
      for (const auto& t : tasks_) {
        const auto& chain = job_.plan.chains[static_cast<std::size_t>(t.task->chain)];
        if (std::find(chain.nodes.begin(), chain.nodes.end(), n) == chain.nodes.end()) continue;
        NodeMetrics m{node.name};
        for (const auto& reported : t.metrics)
          if (reported.node == node.name) m = reported;
        out += first ? "" : ",";
        first = false;
        out += "{\"index\":" + std::to_string(t.task->subtask) + ",\"host\":\"localhost\",\"pid\":" +
               std::to_string(t.process->pid()) + ",\"records_in\":" + std::to_string(m.records_in) +
               ",\"records_out\":" + std::to_string(m.records_out) +
               ",\"bad_records\":" + std::to_string(m.bad_records) + "}";
      }
      out += "]}";
    }
    return out + "]";
  }

  // Sources end their input as if it were exhausted, so the job drains and commits.
  void request_stop() {
    if (stopping_) return;
    stopping_ = true;
    transport::ControlMessage stop{"STOP", {}};
    for (const auto& t : tasks_) send(t, stop);
  }

  void handle_signal(int sig) {
    if (sig == SIGCHLD) {
      reap_children();
      return;
    }
    ++signals_received_;
    int code = sig == SIGINT ? 130 : 143;
    if (signals_received_ == 1) {
      outcome_.exit_code = code;
      if (can_stop_at_checkpoint()) {
        // SPEC §2: sinks commit what the last completed checkpoint covers. Draining instead
        // would publish output that no checkpoint covers, and a later --resume from the last
        // checkpoint would publish it again.
        log_.warn("{} received: taking a last checkpoint, then stopping (send it again to cancel)", ::strsignal(sig));
        if (pending_) abort_checkpoint("the job is stopping", false);
        if (trigger(checkpoints_.root / ("chk-" + std::to_string(next_checkpoint_id_)), false, true, ""))
          pending_->at_end = true; // if it fails, drain
        else
          request_stop();
        return;
      }
      log_.warn("{} received: stopping the job gracefully (send it again to cancel)", ::strsignal(sig));
      request_stop();
    } else {
      log_.warn("{} received again: cancelling the job", ::strsignal(sig));
      outcome_.exit_code = code;
      cancel_all();
      final_state_ = "cancelled";
      ended_ = true;
    }
  }

  // A job that takes checkpoints, with every task running, stops at a last checkpoint.
  bool can_stop_at_checkpoint() const {
    return checkpoints_.interval.count() > 0 && !stopping_ && !interrupted() && !(pending_ && pending_->savepoint) &&
           !tasks_.empty() && all_of([](const TaskRuntime& t) { return t.ready && !t.finished; }) &&
           exhausted_sources_ == 0;
  }

  void reap_children() {
    int status = 0;
    pid_t pid;
    while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
      for (auto& t : tasks_) {
        if (t.process->pid() != pid) continue;
        t.process->reaped(status);
        bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (!(t.finished && clean) && !ended_) {
          // A FAILED message, if the worker managed to send one, is the better reason.
          drain_messages();
          if (!ended_ && !(t.finished && clean))
            task_failed("worker for " + t.label + " (pid " + std::to_string(pid) + ") " + t.process->describe_exit(),
                        true);
        }
      }
    }
  }

  void drain_messages() {
    zmq::message_t identity, body;
    while (!interrupted() && control_.recv(identity, zmq::recv_flags::dontwait)) {
      if (!control_.recv(body, zmq::recv_flags::dontwait)) break;
      auto m = transport::decode_control(body.to_string_view());
      if (m && is_client_command(*m)) handle_client(identity.to_string(), *m);
      else if (m) handle_message(*m);
    }
  }

  void fail(const std::string& reason) {
    if (ended_) return;
    if (!rescale_client_.empty()) {
      reply(rescale_client_, transport::ControlMessage{"ERROR", {}}.set("message", "the job failed: " + reason));
      rescale_client_.clear();
    }
    outcome_.error = reason;
    if (outcome_.exit_code == 0) outcome_.exit_code = 1;
    final_state_ = "failed";
    cancel_all();
    ended_ = true;
  }

  // CANCEL, a grace period to abort sinks, then SIGKILL.
  void cancel_all() {
    transport::ControlMessage cancel{"CANCEL", {}};
    for (const auto& t : tasks_) send(t, cancel);
    auto deadline = Clock::now() + kCancelGrace;
    for (auto& t : tasks_) {
      while (t.process->running() && Clock::now() < deadline) {
        int status = 0;
        if (::waitpid(t.process->pid(), &status, WNOHANG) == t.process->pid()) t.process->reaped(status);
        else std::this_thread::sleep_for(10ms);
      }
      t.process->kill_and_reap();
    }
  }

  void send(const TaskRuntime& t, const transport::ControlMessage& m) {
    if (!t.process->running()) return;
    std::string id = "task-" + std::to_string(t.task->id);
    std::string body = transport::encode_control(m);
    try {
      control_.send(zmq::buffer(id), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
      control_.send(zmq::buffer(body), zmq::send_flags::dontwait);
    } catch (const zmq::error_t&) {
      // The worker is gone (router_mandatory): its exit is handled through SIGCHLD.
    }
  }

  std::string describe_totals() const {
    std::vector<std::vector<NodeMetrics>> per_task;
    for (const auto& t : tasks_) per_task.push_back(t.metrics);
    JobTotals totals = sum_metrics(job_.spec, per_task);
    double seconds = std::chrono::duration<double>(Clock::now() - started_).count();
    char rate[32];
    std::snprintf(rate, sizeof rate, "%.0f", seconds > 0 ? static_cast<double>(totals.read) / seconds : 0.0);
    return std::to_string(totals.read) + " records read, " + std::to_string(totals.written) + " written, " +
           std::to_string(totals.bad) + " bad, " + rate + " records/s read";
  }

  template <typename P> bool all_of(P predicate) const {
    for (const auto& t : tasks_)
      if (!predicate(t)) return false;
    return true;
  }

  void finish_registration() {
    if (final_state_.empty()) final_state_ = stopping_ ? "stopped" : "finished";
    registration_->update(final_state_, pids());
    registration_->remove_sockets();
  }

  LoadedJob job_; // replaced by a rescale
  const RunOptions& options_;
  std::unique_ptr<Launcher> launcher_;
  CheckpointSettings checkpoints_;
  RestartSettings restart_;
  std::unique_ptr<CheckpointDirLock> lock_;
  std::unique_ptr<SpoolJanitor> spool_janitor_;
  std::string control_endpoint_;
  int attempt_ = 0;   // every start of workers: restarts and rescales; tells old messages apart
  int restarts_ = 0;  // restarts after failures, counted against [restart] max_attempts
  bool restart_pending_ = false;
  bool restarting_ = false; // waiting out the restart delay, no workers
  std::string last_failure_;
  std::filesystem::path restore_from_;
  std::optional<std::filesystem::path> latest_completed_;
  std::optional<PendingCheckpoint> pending_;
  std::uint64_t next_checkpoint_id_ = 1;
  std::uint64_t completed_checkpoints_ = 0;
  std::size_t exhausted_sources_ = 0;
  Clock::time_point next_trigger_{};
  std::optional<LoadedJob> rescale_to_;
  std::string rescale_client_;
  Clock::time_point rescale_halted_{};
  Clock::time_point rescale_started_{};
  spdlog::logger& log_;
  SignalChannel signals_;
  zmq::context_t context_;
  zmq::socket_t control_;
  std::unique_ptr<JobRegistration> registration_;
  std::vector<TaskRuntime> tasks_;
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
