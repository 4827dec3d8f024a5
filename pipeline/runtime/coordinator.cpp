#include "pipeline/runtime/coordinator.hpp"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>

#include "operators/wall_clock.hpp"
#include "pipeline/runtime/autoscaler.hpp"
#include "pipeline/runtime/checkpoint_coordinator.hpp"
#include "pipeline/runtime/checkpoint_dir_lock.hpp"
#include "pipeline/runtime/client_commands.hpp"
#include "pipeline/runtime/cluster_setup.hpp"
#include "pipeline/runtime/control_channel.hpp"
#include "pipeline/runtime/field_presence.hpp"
#include "pipeline/runtime/final_publish.hpp"
#include "pipeline/runtime/incremental_snapshots.hpp"
#include "pipeline/runtime/job_metrics.hpp"
#include "pipeline/runtime/job_registry.hpp"
#include "pipeline/runtime/job_security.hpp"
#include "pipeline/runtime/job_state.hpp"
#include "pipeline/runtime/job_status.hpp"
#include "pipeline/runtime/local_launcher.hpp"
#include "pipeline/runtime/metrics_book.hpp"
#include "pipeline/runtime/metrics_server.hpp"
#include "pipeline/runtime/prometheus_text.hpp"
#include "pipeline/runtime/savepoint_adoption.hpp"
#include "pipeline/runtime/signal_channel.hpp"
#include "pipeline/runtime/snapshot_receiver.hpp"
#include "pipeline/runtime/snapshot_server.hpp"
#include "pipeline/runtime/spool_janitor.hpp"
#include "pipeline/runtime/supervisor.hpp"
#include "pipeline/runtime/tap_relay.hpp"
#include "pipeline/runtime/worker_bootstrap.hpp"
#include "pipeline/runtime/worker_pool.hpp"
#include "pipeline/runtime/worker_reuse.hpp"
#include "pipeline/spec/schema_check.hpp"
#include "state/error.hpp"

namespace streamctl::runtime {

namespace {

using namespace std::chrono_literals;

constexpr auto kStartupTimeout = 60s;
constexpr auto kProgressEvery = 10s;

// One run of a job, from its registration to its end: its attempts (the first, restarts after
// failures, rescales), each one's start, and the end of a job whose every task has finished.
// The rest is its collaborators', which it builds and wires together:
//   Launcher, WorkerPool        start the workers and watch their processes (worker_pool.hpp)
//   Supervisor                  events while the job runs: messages, signals, silence
//   JobState                    where the job stands, the transitions that end an attempt, job.json
//   CheckpointCoordinator       checkpoints and savepoints
//   ClientCommands              `status`, `stop`, `cancel`, `savepoint`, `rescale`
//   TapRelay                    `tap`: copies of a node's records to a client
//
// Not thread-safe: the thread that calls run() is the only one that touches it.
class Coordinator {
public:
  Coordinator(const LoadedJob& job, const RunOptions& options, spdlog::logger& log)
      : job_(job), options_(options), log_(log),
        cluster_(options.ignore_cluster ? pipeline::ClusterSpec{} : pipeline::cluster_of(job.spec)), launcher_(make_launcher(job, cluster_, options, log)),
        workers_(*launcher_, control_), refusals_(log, "coordinator") {}

  ~Coordinator() {
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
    // First: a port in use ends the command with nothing registered or started (exit 2).
    if (!options_.ignore_metrics_listen) metrics_server_ = serve_metrics(job_.spec, log_);
    settings_ = checkpoint_settings_of(job_.spec, options_.state_dir);
    restart_ = restart_settings_of(job_.spec, settings_.interval.count() > 0);
    if (options_.dir_lock && options_.dir_lock->root() == settings_.root)
      lock_ = options_.dir_lock;
    else if (settings_.interval.count() > 0)
      lock_ = std::make_shared<CheckpointDirLock>(settings_.root, job_.spec.file.string());
    if (!options_.restore.empty())
      check_restore(options_.restore, job_.spec, options_.allow_non_restored_state);
    restore_from_ = options_.restore;
    prepare_hosts();
    adopt_restored_savepoint();
    record_restored();

    registration_ =
        std::make_unique<JobRegistration>(options_.state_dir, job_.spec, options_.reuse_job_id);
    // What this run starts from is its newest snapshot until a checkpoint completes: `restart`
    // after a kill -9 of this process must go back to it, not to an older one of the checkpoint
    // directory (a savepoint from elsewhere is not there), which would publish again what was
    // published after that older one.
    if (!restore_from_.empty()) registration_->set_last_checkpoint(restore_from_.string());
    // The lock file names this process and the job, for the message refusing the next run: under
    // `run --detach` this is the forked job process, not the parent that took the lock.
    if (lock_) lock_->record_holder(registration_->id());
    state_ = std::make_unique<JobState>(restart_, *registration_, workers_, control_, log_);
    spool_janitor_ = std::make_unique<SpoolJanitor>(settings_.root, registration_->id(), log_);
    registration_->write_pipeline(job_.text, job_.overrides, job_.variables);
    clear_final_publish(registration_->dir());
    registration_->write_run_options(
        {{"transport", options_.transport},
         {"savepoint_on_exit", options_.savepoint_on_exit ? "1" : "0"},
         {"allow_non_restored_state", options_.allow_non_restored_state ? "1" : "0"},
         {"max_workers", std::to_string(options_.worker_limits.per_job)},
         {"max_host_workers", std::to_string(options_.worker_limits.per_host)}});
    if (options_.on_registered) options_.on_registered(registration_->id(), registration_->dir());

    control_endpoint_ = control_.bind(options_.transport, registration_->socket_dir());
    registration_->set_control_endpoint(control_endpoint_);
    if (!hosts_.empty())
      worker_endpoint_ = control_.bind_for_hosts(hosts_.front().coordinator_address, security_,
                                                 refusals_.callback());
    std::optional<std::filesystem::path> latest;
    if (!restore_from_.empty()) latest = restore_from_;
    checkpoints_ =
        std::make_unique<CheckpointCoordinator>(job_, settings_, registration_->id(), latest,
                                                workers_, control_, *spool_janitor_, *state_, log_);
    commands_ = std::make_unique<ClientCommands>(job_, options_.worker_limits, workers_,
                                                 *checkpoints_, control_, *state_, log_);
    // The workers send their snapshot files here (snapshot_receiver.hpp).
    if (snapshots_on_coordinator()) uploads_ = std::make_unique<SnapshotReceiver>(log_);
    commands_->set_metrics([this] { return current_metrics(); });
    commands_->set_warnings([this] { return data_warnings(/*at_end=*/false); });
    // A rescale keeps the workers whose key groups stay (kept_chain.hpp); with hosts each
    // worker's process is behind its launcher (ssh, srun), which cannot take a new task yet.
    checkpoints_->set_keep_workers_on_rescale(hosts_.empty() && cluster_.launcher == pipeline::LauncherKind::Local);
    checkpoints_->set_counts_of_task([this](const TaskRuntime& t, std::string_view counts) {
      return metrics_book_.checkpoint_counts(t.task->subtask, counts);
    });
    commands_->set_placement_check([this](const LoadedJob& next) -> std::optional<std::string> {
      if (hosts_.empty()) return std::nullopt;
      try {
        place_tasks(next, hosts_);
      } catch (const Error& e) {
        return std::string(e.what());
      }
      return std::nullopt;
    });
    start_autoscaler();
    taps_ = std::make_unique<TapRelay>(job_, workers_, control_);
    supervisor_ = std::make_unique<Supervisor>(restart_, signals_, control_, workers_, *state_,
                                               *checkpoints_, *commands_, *taps_, uploads_.get(),
                                               snapshot_server_, log_);

    for (;;) {
      launch();
      if (state_->rescale_pending()) {
        if (!rescale()) break;
        continue;
      }
      if (state_->restart_pending() && !state_->ended() && restart()) continue;
      break;
    }
    // No worker is left to write into a checkpoint: one that failed leaves no chk-N behind.
    if (settings_.interval.count() > 0) checkpoints_->prune();
    spool_janitor_->sweep_ended();
    JobMetrics final_figures = current_metrics();
    for (auto& s : final_figures.subtasks) s.pid = 0; // every worker has exited
    registration_->set_final_report(status_json(job_, final_figures), state_->failure(),
                                    state_->outcome().warnings);
    // A client waiting for a savepoint or a rescale that will not come gets its answer.
    checkpoints_->answer_pending_client("the job has ended");
    state_->record_end();
    taps_->end_all("the job has ended");
    publish_metrics(Clock::now(), true);
    return state_->outcome();
  }

private:
  // A job with hosts ([cluster] launcher = "ssh"): every host reached and checked, the job
  // placed on them and its keys made, before anything starts (exit 2 when one cannot be).
  void prepare_hosts() {
    if (cluster_.launcher == pipeline::LauncherKind::Local) return;
    hosts_ = launcher_->prepare();
    task_hosts_ = place_tasks(job_, hosts_);
    if (cluster_.encrypt) {
      security_ = transport::LinkSecurity::generate();
    } else {
      log_.warn("[cluster] encrypt = false: the job's links between hosts are NOT encrypted or "
                "authenticated; anyone on the network can read its records and connect to its workers");
    }
    std::string where;
    for (const auto& host : hosts_) where += (where.empty() ? "" : ", ") + host.name + " (" + std::to_string(host.slots) + " slots)";
    log_.info("hosts: {}; links between hosts: {}", where, security_.describe());
  }

  // Whether the workers send their snapshot files to this process and fetch them from it,
  // rather than use CHECKPOINT_DIR themselves ([checkpoint] storage).
  bool snapshots_on_coordinator() const {
    return !hosts_.empty() && cluster_.storage == pipeline::CheckpointStorage::Coordinator;
  }

  // `run --from-savepoint` with incremental checkpoints: the savepoint becomes the job's
  // newest checkpoint (hard links, savepoint_adoption.hpp), so that the first checkpoint writes
  // what changed since it, not the whole state. Workers on other hosts read the savepoint where
  // the person put it, as before.
  void adopt_restored_savepoint() {
    if (restore_from_.empty() || settings_.interval.count() == 0 || !hosts_.empty() ||
        !incremental_settings_of(job_.spec).enabled)
      return;
    auto adopted = adopt_savepoint(settings_.root, restore_from_, job_.spec.name);
    if (!adopted) {
      log_.debug("the first checkpoint is full: the savepoint {} was not adopted: {}", restore_from_.string(),
                 adopted.error());
      return;
    }
    log_.debug("savepoint {} adopted as checkpoint {} (hard links): checkpoints build on it", restore_from_.string(),
               adopted->string());
    adopted_from_ = restore_from_;
    adopted_as_ = *adopted;
    restore_from_ = *adopted;
  }

  // Before any worker starts: the checkpoint directory records what this run goes on from, so
  // that `run --resume` after a kill -9 before its first checkpoint goes back there, not to an
  // older snapshot of the directory (or one of a timeline an older savepoint left), which
  // would publish output again (checkpoint_metadata.hpp, mark_restored).
  void record_restored() {
    if (restore_from_.empty() || settings_.interval.count() == 0) return;
    auto m = read_metadata(restore_from_);
    if (!m) throw Error(ErrorKind::Snapshot, m.error());
    if (auto marked = mark_restored(settings_.root, checkpoint_dir_of(restore_from_), m->checkpoint_id); !marked)
      throw Error(ErrorKind::Internal, "cannot record what the job restores from: " + marked.error());
  }

  // Where this attempt restores from, for the log: an adopted savepoint by its own name too.
  std::string describe_restore() const {
    if (!adopted_from_.empty() && restore_from_ == adopted_as_)
      return adopted_from_.string() + " (adopted as " + adopted_as_.filename().string() + ")";
    return restore_from_.string();
  }

  // What every worker of a job with hosts reads first (worker_bootstrap.hpp).
  std::string bootstrap() const {
    if (hosts_.empty()) return {};
    WorkerBootstrap b;
    b.pipeline = job_.text;
    b.overrides = job_.overrides;
    b.variables = job_.variables;
    b.security = encode_link_security(security_);
    b.heartbeat_timeout = restart_.heartbeat_timeout;
    b.checkpoint_storage_coordinator = snapshots_on_coordinator();
    return encode_bootstrap(b);
  }

  // Starts this attempt's workers and runs the job until it ends or must restart.
  void launch() {
    checkpoints_->begin_attempt(restore_from_);
    metrics_book_.begin_attempt(job_, restore_from_, registration_->id(), log_);
    // Workers on other hosts fetch what they restore from here (storage = "coordinator").
    snapshot_server_.begin_attempt(attempt_, snapshots_on_coordinator() ? restore_from_ : std::filesystem::path());
    AttemptArgs args;
    args.job_dir = registration_->dir();
    args.socket_dir = registration_->socket_dir();
    // With hosts, every worker (this host's too) reaches the coordinator and its peers over
    // tcp, on the address the hosts reach this one at.
    args.control_endpoint = hosts_.empty() ? control_endpoint_ : worker_endpoint_;
    args.transport = hosts_.empty() ? options_.transport : "tcp";
    args.hosts = task_hosts_;
    args.bootstrap = bootstrap();
    args.attempt = attempt_;
    args.restore = restore_from_;
    if (checkpoints_->enabled()) {
      args.spool_dir = spool_janitor_->dir();
      args.run_tag = registration_->id();
    }
    args.log_flags = options_.worker_log_flags;
    workers_.start(job_, args, std::move(kept_));
    kept_.clear();
    if (!hosts_.empty()) log_.info("placement: {}", describe_placement());
    state_->record("running");
    log_.info("job {} started: {} task(s) in {} worker process(es){}", registration_->id(), workers_.size(),
              workers_.process_count(),
              restore_from_.empty() ? std::string() : ", restored from " + describe_restore());
    if (!await_ready()) return;
    start_data_flow();
    supervise();
  }

  // The savepoint of a rescale is complete and the workers are gone: start the new plan from
  // it (SPEC §7: state redistributed by key group). The job keeps its id. False when the new
  // parallelism does not fit the hosts: the job fails (its savepoint stays).
  bool rescale() {
    LoadedJob next = state_->take_rescaled();
    // The workers parked for tasks of the next plan (worker_reuse.hpp) go on; the others have
    // gone, and the pool points into the old plan.
    std::map<int, ParkedWorker> parked = workers_.take_parked();
    kept_.clear();
    for (const auto& reuse : plan_worker_reuse(job_, next))
      if (auto it = parked.find(reuse.old_task); it != parked.end()) kept_[reuse.new_task] = std::move(it->second);
    parked.clear(); // any other is killed
    workers_.clear();
    job_ = std::move(next);
    ++attempt_;
    restore_from_ = *checkpoints_->latest_completed();
    registration_->write_pipeline(job_.text, job_.overrides, job_.variables);
    if (!hosts_.empty()) {
      try {
        task_hosts_ = place_tasks(job_, hosts_);
      } catch (const Error& e) {
        state_->fail(std::string(e.what()) + " (the savepoint " + restore_from_.string() + " holds the job)");
        return false;
      }
    }
    log_.info("rescaling: restarting with {} from {}{}", describe_parallelism(job_.spec),
              restore_from_.string(),
              kept_.empty() ? std::string() : ", keeping " + std::to_string(kept_.size()) + " worker(s)");
    return true;
  }

  // After a failure: every worker goes, and after the strategy's delay the job starts again
  // from its latest completed checkpoint (SPEC §7). False when the job ended meanwhile.
  bool restart() {
    int restarts = state_->begin_restart();
    workers_.cancel_all();
    workers_.clear();
    // Nothing was published that the checkpoint restored from does not cover: either the
    // attempt failed before its end, or its sinks were publishing after a final checkpoint.
    clear_final_publish(registration_->dir());
    ++attempt_;
    if (const auto& latest = checkpoints_->latest_completed()) restore_from_ = *latest;
    if (!replace_on_hosts_left()) return false;
    spool_janitor_->sweep_live(restore_from_);
    auto delay = restart_.delay_before(restarts);
    log_.warn("restarting the job (attempt {} of {}) in {} ms from {}: {}", restarts,
              restart_.max_attempts, delay.count(),
              restore_from_.empty() ? std::string("the beginning") : restore_from_.string(),
              state_->last_failure());
    state_->record("restarting");
    state_->set_restarting(true);
    auto until = Clock::now() + delay;
    while (Clock::now() < until && !state_->ended() && !state_->stopping())
      supervisor_->poll_once(
          std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()) + 1ms);
    state_->set_restarting(false);
    return state_->restart_may_go_on();
  }

  // A job with hosts, restarting: looks at every configured host again and places the job on
  // those that answer (one lost before comes back when it answers again). False, the job
  // failed naming the lost hosts, when those left cannot take it.
  bool replace_on_hosts_left() {
    if (hosts_.empty()) return true;
    HostCheck check = launcher_->check_hosts();
    for (const auto& problem : check.problems) log_.warn("lost {}", problem);
    std::string lost = pipeline::detail::join(check.problems, "; ");
    if (check.usable.empty()) {
      state_->fail("no host is left to restart the job on: " + lost);
      return false;
    }
    try {
      task_hosts_ = place_tasks(job_, check.usable);
    } catch (const Error& e) {
      state_->fail("the hosts left cannot take the job after losing " + lost + ": " + e.what());
      return false;
    }
    hosts_ = std::move(check.usable);
    return true;
  }

  // Every worker binds its input and says where; false when the job ended first.
  bool await_ready() {
    auto deadline = Clock::now() + kStartupTimeout;
    while (!workers_.all_ready()) {
      if (Clock::now() > deadline) {
        supervisor_->task_failed("workers did not start within " +
                                 std::to_string(kStartupTimeout.count()) + "s");
        return false;
      }
      if (!supervisor_->poll_once(200ms)) return false;
    }
    return true;
  }

  void start_data_flow() {
    unsigned kept_groups = 0, kept_workers = 0;
    for (const auto& t : workers_.tasks()) {
      kept_groups += t.kept_groups;
      kept_workers += t.kept_groups > 0 ? 1 : 0;
    }
    if (kept_workers > 0)
      log_.info("{} worker(s) kept {} key group(s) in memory from before the rescale", kept_workers, kept_groups);
    transport::ControlMessage start{"START", {}};
    if (options_.savepoint_on_exit) start.set("at_end", "savepoint");
    for (const auto& t : workers_.tasks())
      if (!t.endpoint.empty()) start.set("endpoint." + std::to_string(t.task->id), t.endpoint);
    workers_.send_all(start);
    log_.info("all {} task(s) ready: records flowing", workers_.size());
    checkpoints_->data_flowing(Clock::now());
    state_->attempt_flowing(restore_from_, describe_parallelism(job_.spec));
    // A STOP sent before a worker had connected was dropped by the ROUTER: say it again.
    if (state_->stopping()) workers_.send_all(transport::ControlMessage{"STOP", {}});
  }

  void supervise() {
    auto next_progress = Clock::now() + kProgressEvery;
    if (autoscaler_) autoscaler_->attempt_flowing(Clock::now());
    while (!workers_.all_finished()) {
      if (!supervisor_->poll_once(until_next_duty())) return;
      auto now = Clock::now();
      supervisor_->check_heartbeats(now);
      checkpoints_->maybe_trigger(now, state_->stopping());
      checkpoints_->check_timeout(now);
      publish_metrics(now);
      if (autoscaler_) autoscaler_->tick(now);
      if (state_->interrupted()) return;
      if (now >= next_progress) {
        log_.info("progress: {}", describe_totals());
        next_progress += kProgressEvery;
      }
    }
    finish();
  }

  // Every task said FINISHED, so every end of input has been read. The sinks publish their
  // last output at RELEASE. That must be on record first, so that no `restart` after this
  // coordinator dies and no --resume runs the job again (final_publish.hpp). A job that takes
  // checkpoints first takes a final one (as Flink does since FLIP-147), which prepares that
  // output: a worker that dies while publishing it is restarted from that checkpoint and
  // publishes the rest, and the job still ends with its whole output.
  void finish() {
    bool covered = false;
    if (checkpoints_->enabled()) {
      auto final = take_final_checkpoint();
      if (!final) return; // the job failed, restarts, or was cancelled meanwhile
      covered = *final;
    }
    if (auto ok = mark_finishing(registration_->dir(), workers_.size()); !ok) {
      state_->fail("cannot record that the job publishes its final output: " + ok.error());
      return;
    }
    if (auto ok = mark_drained(settings_.root); !ok) log_.warn("{}", ok.error());
    auto release = workers_.release([this] { return supervisor_->wait_while_publishing(100ms); },
                                    [this](const auto& in) { supervisor_->serve_while_publishing(in); });
    if (release.cancelled || state_->ended()) return; // cancelled (its workers are gone)
    if (!release.unclean.empty() && covered && !release.reader_gone) {
      // The final checkpoint holds what is left to publish: a restart from it publishes
      // that and nothing twice (a sink's restore publishes only what is not out yet).
      supervisor_->task_failed("the worker of " + pipeline::detail::join(release.unclean, ", ") +
                               " ended before it had published the job's final output" +
                               (release.reasons.empty() ? std::string() : ": " + release.reasons));
      return;
    }
    if (!release.unclean.empty()) {
      // A sink that could not publish the job's last output (stdout on a full disk, say):
      // that output is incomplete, and neither a restart nor --resume may take the job for
      // finished. Not retried: the sinks may have published part of it already.
      if (release.reader_gone) {
        // Like `yes | head`: the reader has what it wanted; end quietly, as SIGPIPE would.
        log_.info("the reader of stdout has gone: stopping the job");
        state_->outcome().exit_code = exit_code_for(ErrorKind::OutputClosed);
        state_->fail("");
        return;
      }
      state_->fail("the final output of " + pipeline::detail::join(release.unclean, ", ") +
                   " could not be published" +
                   (release.reasons.empty() ? std::string() : ": " + release.reasons) +
                   "; it may be incomplete");
      return;
    }
    for (const auto& t : workers_.tasks())
      log_.debug("{}: {}", t.label, encode_metrics(t.metrics));
    log_.info("job {} finished: {}", registration_->id(), describe_totals());
    for (auto& line : data_warnings(/*at_end=*/true)) {
      log_.warn("{}", line);
      state_->outcome().warnings.push_back(std::move(line));
    }
    spool_janitor_->sweep_drained();
  }

  // Warnings about the data (issue 10): what shed nodes dropped, a node that passed on none
  // of what it read, a field that no input record had. At the end of the run every figure is
  // final; while the job runs (`status`) only what enough records show: a filter must have
  // read kFieldPresenceRecords records, and a field must be missing from that many.
  std::vector<std::string> data_warnings(bool at_end) const {
    const auto totals = metrics_book_.totals(job_, workers_.tasks());
    std::vector<FieldPresenceReport> presence;
    for (const auto& t : workers_.tasks())
      presence.insert(presence.end(), t.field_presence.begin(), t.field_presence.end());
    std::vector<std::string> lines;
    if (at_end) lines = describe_shedding(job_.spec, totals);
    for (auto part : {describe_silent_drops(job_.spec, totals, at_end ? 1 : kFieldPresenceRecords),
                      describe_unseen_fields(job_.spec, at_end ? presence : settled_reports(presence))})
      for (auto& line : part) lines.push_back(std::move(line));
    return lines;
  }

  // The job's last checkpoint, taken once every task has finished: true when it completed,
  // false when it could not be taken (the job then publishes without one), nullopt when the
  // attempt ended while it was being taken.
  std::optional<bool> take_final_checkpoint() {
    auto dir = checkpoints_->next_checkpoint_dir();
    if (!checkpoints_->trigger({.dir = dir, .final = true})) return false;
    while (checkpoints_->pending()) {
      if (!supervisor_->poll_once(until_next_duty())) return std::nullopt;
      checkpoints_->check_timeout(Clock::now());
    }
    if (state_->interrupted()) return std::nullopt;
    if (checkpoints_->latest_completed() == dir) {
      log_.info("final checkpoint complete: {}; the sinks publish the job's last output", dir.string());
      return true;
    }
    log_.warn("the final checkpoint failed: the sinks publish their last output without one, and a worker "
              "that dies while they do fails the job");
    return false;
  }

  // "h1: in[0], per_key[0]; h2: in[1]; this host: out[0]".
  std::string describe_placement() const {
    std::vector<std::pair<std::string, std::string>> by_host; // in the order hosts first appear
    for (const auto& t : workers_.tasks()) {
      std::string host = t.host.empty() ? "this host" : t.host;
      auto it = std::find_if(by_host.begin(), by_host.end(), [&](const auto& h) { return h.first == host; });
      if (it == by_host.end()) it = by_host.insert(by_host.end(), {host, ""});
      it->second += (it->second.empty() ? "" : ", ") + t.label;
    }
    std::string out;
    for (const auto& [host, labels] : by_host) out += (out.empty() ? "" : "; ") + host + ": " + labels;
    return out;
  }

  std::chrono::milliseconds until_next_duty() const {
    auto now = Clock::now();
    auto next = checkpoints_->next_duty(now + 1000ms);
    return std::max(0ms, std::chrono::duration_cast<std::chrono::milliseconds>(next - now) + 1ms);
  }

  // What `status` and /metrics show of the job now.
  JobMetrics current_metrics() const {
    JobFacts facts;
    facts.job_id = registration_->id();
    facts.state = state_->state();
    facts.restarts = state_->restarts();
    facts.checkpoints_completed = checkpoints_->completed_count();
    facts.checkpoints_failed = checkpoints_->failed_count();
    return metrics_book_.view(job_, workers_.tasks(), facts, Clock::now(), operators::wall_clock_ms());
  }

  // [autoscale] enabled (or `run --autoscale`): rescales through the client commands.
  void start_autoscaler() {
    auto settings = autoscale_settings_of(job_.spec);
    if (!settings.enabled) return;
    autoscaler_ = std::make_unique<Autoscaler>(
        job_, settings,
        AutoscaleHooks{[this] { return current_metrics(); },
                       [this] { return commands_->why_no_savepoint_now(); },
                       [this] { return checkpoints_->pending(); },
                       [this](const std::string& changes) { return commands_->rescale(changes); }},
        log_);
    commands_->set_autoscale_status([this] { return autoscaler_->last_decision_json(); });
  }

  // What /metrics answers until the next publish: about once a second, and the final figures.
  void publish_metrics(Clock::time_point now, bool final = false) {
    if (!metrics_server_ || (!final && now < next_metrics_)) return;
    metrics_server_->publish(render_prometheus_text(current_metrics()));
    next_metrics_ = now + 1s;
  }

  std::string describe_totals() const {
    return runtime::describe_totals(job_.spec, metrics_book_.totals(job_, workers_.tasks()),
                                    std::chrono::duration<double>(Clock::now() - started_).count());
  }

  LoadedJob job_; // replaced by a rescale; the collaborators hold a reference to it
  const RunOptions& options_;
  spdlog::logger& log_;
  CheckpointSettings settings_;
  RestartSettings restart_;
  std::shared_ptr<CheckpointDirLock> lock_;
  std::unique_ptr<JobRegistration> registration_;
  std::unique_ptr<SpoolJanitor> spool_janitor_;
  // Before the control channel: ZeroMQ's threads, started with its socket, inherit this
  // thread's signal mask, so they must find SIGINT, SIGTERM and SIGCHLD blocked already.
  SignalChannel signals_;
  pipeline::ClusterSpec cluster_;
  std::unique_ptr<Launcher> launcher_; // by [cluster] launcher (cluster_setup.hpp)
  ControlChannel control_;
  WorkerPool workers_;
  std::unique_ptr<JobState> state_;
  std::unique_ptr<CheckpointCoordinator> checkpoints_;
  std::unique_ptr<ClientCommands> commands_;
  std::unique_ptr<TapRelay> taps_; // `streamctl tap`
  MetricsBook metrics_book_;
  std::unique_ptr<MetricsServer> metrics_server_; // [metrics] listen
  Clock::time_point next_metrics_;
  std::unique_ptr<SnapshotReceiver> uploads_; // storage = "coordinator" with hosts
  std::unique_ptr<Supervisor> supervisor_;
  std::unique_ptr<Autoscaler> autoscaler_; // [autoscale] enabled
  SnapshotServer snapshot_server_; // the running attempt's snapshot, to workers that cannot read it
  RefusalLog refusals_; // peers without the job's keys, refused by the control socket
  std::string control_endpoint_; // for clients (and local workers of a job without hosts)
  // A job with hosts: the hosts found, each task's host, the job's keys, and the control
  // endpoint workers connect to.
  std::vector<HostInfo> hosts_;
  std::vector<std::string> task_hosts_;
  transport::LinkSecurity security_ = transport::LinkSecurity::plain();
  std::string worker_endpoint_;
  int attempt_ = 0; // every start of workers: restarts and rescales; tells old messages apart
  std::map<int, ParkedWorker> kept_; // a rescale's parked workers, by their next task, until launch
  std::filesystem::path restore_from_; // what the running attempt started from
  // A savepoint restored from as the job's checkpoint adopted_as_ (adopt_restored_savepoint).
  std::filesystem::path adopted_from_;
  std::filesystem::path adopted_as_;
  Clock::time_point started_ = Clock::now();
};

} // namespace

RunOutcome run_job(const LoadedJob& job, const RunOptions& options, spdlog::logger& log) {
  Coordinator coordinator(job, options, log);
  return coordinator.run();
}

} // namespace streamctl::runtime
