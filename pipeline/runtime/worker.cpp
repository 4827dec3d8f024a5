#include "pipeline/runtime/worker.hpp"

#include <deque>
#include <map>
#include <optional>
#include <fstream>
#include <sstream>

#include <zmq.hpp>

#include "operators/connectors/registry.hpp"
#include "pipeline/runtime/async_snapshot_writer.hpp"
#include "pipeline/runtime/barrier_aligner.hpp"
#include "pipeline/runtime/checkpoint_restore.hpp"
#include "pipeline/runtime/checkpoint_settings.hpp"
#include "pipeline/runtime/control_channel.hpp"
#include "pipeline/runtime/forked_snapshot.hpp"
#include "pipeline/runtime/final_publish.hpp"
#include "operators/wall_clock.hpp"
#include "pipeline/runtime/incremental_snapshots.hpp"
#include "pipeline/runtime/job_loader.hpp"
#include "pipeline/runtime/job_registry.hpp"
#include "pipeline/runtime/job_security.hpp"
#include "pipeline/runtime/kept_chain.hpp"
#include "pipeline/runtime/job_metrics.hpp"
#include "pipeline/runtime/latency_window.hpp"
#include "pipeline/runtime/liveness_beacon.hpp"
#include "pipeline/runtime/output_router.hpp"
#include "pipeline/runtime/remote_checkpoint_files.hpp"
#include "pipeline/runtime/runtime_settings.hpp"
#include "pipeline/runtime/snapshot_uploader.hpp"
#include "pipeline/runtime/spool_janitor.hpp"
#include "pipeline/runtime/task_chain.hpp"
#include "pipeline/runtime/watermark_tracker.hpp"
#include "state/batch_codec.hpp"
#include "state/error.hpp"
#include "transport/control.hpp"
#include "transport/data_channel.hpp"
#include "transport/frame.hpp"
#include "transport/local_address.hpp"
#include "transport/secure_endpoint.hpp"
#include "transport/zap_handler.hpp"

namespace streamctl::runtime {

namespace {

using namespace std::chrono_literals;

// CANCEL: `completed` is the newest checkpoint the coordinator completed (0: none).
struct Cancelled {
  std::uint64_t completed = 0;
};
// The coordinator ends the task after a savepoint that stops the job: nothing more is
// published, open windows stay in the savepoint. `park`: a rescale keeps this worker
// (kept_chain.hpp).
struct Halted {
  bool park = false;
};

constexpr auto kHeartbeatEvery = 1s;
constexpr auto kProcessingTimeTick = 100ms;
// Frames handled per turn of the input loop before control messages and timers get a look.
constexpr int kFramesPerTurn = 64;

class Worker {
public:
  // `kept`: what this process ran before a rescale reassigned it (kept_chain.hpp).
  Worker(const WorkerOptions& options, spdlog::logger& log, std::optional<KeptChain> kept = std::nullopt)
      : options_(options), log_(log), control_(context_, zmq::socket_type::dealer),
        refusals_(log, "task " + std::to_string(options.task)), kept_(std::move(kept)),
        field_names_(kept_ && kept_->names ? std::move(kept_->names) : std::make_unique<state::FieldNames>()),
        names_(*field_names_) {}

  ~Worker() {
    beacon_.reset();
    snapshot_writer_.reset();
    // Close every socket before the context is destroyed (zmq_ctx_term waits for them).
    gate_.reset();
    router_.reset();
    control_.close();
    zap_.reset(); // after every socket that used it, before the context
  }

  int run() {
    control_.set(zmq::sockopt::routing_id, ControlChannel::task_identity(options_.task, options_.attempt));
    control_.set(zmq::sockopt::linger, 2000);
    // The job's keys, when its links leave this host (job_security.hpp): the ZAP handler must
    // run before the input gate binds as a CURVE server.
    if (options_.bootstrap) {
      auto security = decode_link_security(options_.bootstrap->security);
      if (!security) throw Error(ErrorKind::Internal, security.error());
      security_ = *security;
    }
    if (security_.encrypt) zap_ = std::make_unique<transport::ZapHandler>(context_, security_, refusals_.callback());
    transport::connect_endpoint(control_, options_.coordinator, security_);
    std::chrono::milliseconds reply_timeout = options_.bootstrap ? options_.bootstrap->heartbeat_timeout : 0ms;
    beacon_ = std::make_unique<LivenessBeacon>(context_, options_.coordinator, options_.task, options_.attempt,
                                               kHeartbeatEvery, reply_timeout, [this, reply_timeout] {
                                                 if (options_.on_coordinator_lost)
                                                   options_.on_coordinator_lost(
                                                       "the coordinator has not answered for " +
                                                       std::to_string(reply_timeout.count()) + " ms");
                                               },
                                               security_);
    try {
      setup();
      if (chain_->source() != nullptr) run_source_loop();
      else run_input_loop();
      state_changes();
      chain_->finish_operators(emitter());
      if (router_) router_->send_end_of_input();
      log_.debug("{} finished: sent {} records in {} batches", chain_->label(), router_->records_sent(),
                 router_->batches_sent());
      send_tapped(Clock::now(), /*all=*/true);
      transport::ControlMessage finished{"FINISHED", {}};
      finished.set("metrics", encode_metrics(chain_->metrics(TaskChain::StateFigures::current)));
      load(Clock::now()).write_to(finished);
      if (!latency_.empty()) finished.set("latency", encode_latency(latency_figures()));
      finished.set("unseen_fields", encode_field_presence(chain_->field_presence().reports()));
      send(finished);
      await_release();
      // The whole job has finished: only now is the last output published, so that a
      // restart before this point publishes nothing twice.
      chain_->finish_sink();
      if (auto ok = mark_task_published(options_.job_dir, static_cast<std::size_t>(options_.task)); !ok)
        log_.warn("{}", ok.error()); // `restart` then counts this task's output as incomplete
      return 0;
    } catch (const Halted& halted) {
      if (chain_) chain_->abort();
      if (halted.park) return park();
      log_.debug("task {} halted after a savepoint", options_.task);
      return 0;
    } catch (const Cancelled& cancelled) {
      if (chain_) chain_->cancel(cancelled.completed);
      log_.debug("task {} cancelled", options_.task);
      return 2;
    } catch (const Error& e) {
      const char* kind = e.kind() == ErrorKind::OutputClosed ? "output_closed"
                         : e.kind() == ErrorKind::Snapshot   ? "snapshot"
                         : e.kind() == ErrorKind::Usage      ? "usage"
                                                               : "error";
      return report_failure(e.what(), kind);
    } catch (const std::exception& e) {
      return report_failure(e.what(), "error");
    }
  }

  // After run(): whether a rescale gave this process another task, which task, and what it
  // keeps of this one.
  const std::optional<Reassignment>& reassignment() const { return reassignment_; }
  KeptChain take_kept() {
    KeptChain k;
    k.names = std::move(field_names_);
    k.registry = std::move(registry_);
    k.job = std::move(job_);
    k.tap = std::move(tap_);
    k.chain = std::move(chain_);
    if (snapshot_state_) {
      k.checkpoint_id = snapshot_state_->checkpoint_id;
      k.checkpoint_dir = snapshot_state_->directory;
    }
    return k;
  }

private:
  // HALT park=1: a rescale keeps this process (kept_chain.hpp). Its chain stays until REASSIGN
  // says which task it runs next; CANCEL or HALT, or no word for as long as a start may take,
  // end it as a halted worker.
  int park() {
    log_.debug("task {} parked after the rescale's checkpoint{}", options_.task,
               snapshot_state_ ? "" : " (its state has changed since: the next task reads it from files)");
    auto deadline = Clock::now() + 60s;
    while (Clock::now() < deadline) {
      auto message = receive_control(200ms);
      if (!message) continue;
      if (message->type == "CANCEL") return 2;
      if (message->type == "HALT") return 0;
      if (message->type != "REASSIGN") continue;
      Reassignment next;
      next.task = static_cast<int>(message->get_int("task", -1));
      next.attempt = static_cast<int>(message->get_int("attempt", -1));
      next.restore = message->get("restore");
      if (next.task < 0 || next.attempt < 0 || next.restore.empty()) {
        log_.warn("task {}: ignored a malformed REASSIGN", options_.task);
        continue;
      }
      reassignment_ = std::move(next);
      if (router_) router_->drop_unsent();
      return 0;
    }
    return 0;
  }

  int report_failure(const std::string& message, const std::string& kind) {
    if (chain_) chain_->abort();
    std::string where = chain_ ? chain_->label() : "task " + std::to_string(options_.task);
    log_.debug("{} failed: {}", where, message);
    send(transport::ControlMessage{"FAILED", {}}
             .set("chain", where)
             .set("kind", kind)
             .set("message", message));
    // Stay until the coordinator has read the reason and cancels: exiting at once would race
    // the message with SIGCHLD, and the job would fail as "exited with status 1".
    auto deadline = Clock::now() + std::chrono::seconds(5);
    while (Clock::now() < deadline) {
      auto reply = receive_control(std::chrono::milliseconds(200));
      if (reply && reply->type == "CANCEL") break;
    }
    return 1;
  }

  void setup() {
    // The pipeline as the coordinator expanded it: its ${NAME} take the coordinator's values,
    // never this process's environment.
    StoredPipeline stored;
    if (options_.bootstrap) {
      stored.text = options_.bootstrap->pipeline;
      stored.overrides = options_.bootstrap->overrides;
      stored.variables = options_.bootstrap->variables;
    } else {
      stored = read_stored_pipeline(options_.job_dir);
    }
    registry_ = std::make_unique<operators::Registry>();
    connectors::register_all_types(*registry_);
    job_ = std::make_unique<LoadedJob>(load_job_text(stored.text, options_.file_name, options_.base_dir,
                                                     stored.overrides, *registry_, stored.variables));
    settings_ = settings_of(job_->spec);
    if (options_.task < 0 || static_cast<std::size_t>(options_.task) >= job_->plan.tasks.size())
      throw Error(ErrorKind::Internal, "no task " + std::to_string(options_.task) + " in the plan");
    task_ = job_->plan.tasks[static_cast<std::size_t>(options_.task)];

    auto warn = [this](const std::string& message) { log_.warn("{}", message); };
    chain_ = std::make_unique<TaskChain>(job_->spec, job_->plan, task_, *registry_, names_, warn, options_.spool_dir,
                                         options_.run_tag);
    tap_ = std::make_unique<RecordTap>(chain_->node_names(), names_);
    chain_->set_tap(tap_.get());
    if (options_.on_label) options_.on_label(chain_->label());
    if (!options_.restore.empty()) restore_chain();
    // What the old chain still holds belongs to other subtasks now, which read it from files.
    kept_.reset();
    exactly_once_ = job_->spec.root["checkpoint"]["mode"].value_or(std::string("exactly-once")) != "at-least-once";

    std::string endpoint;
    if (!job_->plan.edges_into(task_.chain).empty()) {
      std::string bind = options_.transport == "tcp"
                             ? tcp_bind_endpoint()
                             : "ipc://" + (options_.socket_dir / ("task-" + std::to_string(task_.id) + "-" +
                                                                  std::to_string(options_.attempt) + ".sock"))
                                              .string();
      gate_ = std::make_unique<transport::InputGate>(context_, bind, security_, refusals_.callback());
      endpoint = gate_->endpoint();
    }
    // Its own pid: on another host the coordinator only knows the pid of its ssh.
    send(transport::ControlMessage{"READY", {}}
             .set("endpoint", endpoint)
             .set("pid", std::to_string(::getpid()))
             .set("kept_groups", std::to_string(kept_groups_)));

    // Wait for the coordinator to say where every task's input gate is.
    std::map<int, std::string> endpoints;
    for (;;) {
      auto message = receive_control(60s);
      if (!message) throw Error(ErrorKind::Internal, "the coordinator did not start the job in time");
      if (message->type == "START") {
        for (const auto& [key, value] : message->fields)
          if (key.rfind("endpoint.", 0) == 0) endpoints[std::stoi(key.substr(9))] = value;
        savepoint_at_end_ = message->get("at_end") == "savepoint";
        if (savepoint_at_end_ && chain_->source()) chain_->source()->ends_with_savepoint();
        break;
      }
      handle_control(*message);
    }
    router_ = std::make_unique<OutputRouter>(context_, job_->spec, job_->plan, task_, endpoints, names_,
                                             settings_.batch_size, settings_.buffer_timeout,
                                             [this](zmq::socket_t& s) { wait_writable(s); }, security_);
    last_heartbeat_ = Clock::now();
  }

  // With [checkpoint] storage = "coordinator" the snapshot is on the coordinator's disk only:
  // a private copy is fetched first (remote_checkpoint_files.hpp) and removed once the chain
  // has read its state from it, or failed to.
  void restore_chain() {
    std::optional<StagingDir> staged;
    auto on_coordinator = [&](std::string message) {
      return staged ? name_on_coordinator(std::move(message), *staged, checkpoint_dir_of(options_.restore))
                    : message;
    };
    if (options_.bootstrap && options_.bootstrap->checkpoint_storage_coordinator) {
      auto fetched = fetch_snapshot(context_, options_.coordinator, security_, options_.task, options_.attempt);
      if (!fetched) throw Error(ErrorKind::Snapshot, fetched.error());
      staged.emplace(std::move(*fetched));
    }
    auto restore = CheckpointRestore::open(staged ? staged->path() : options_.restore);
    if (!restore) throw Error(ErrorKind::Snapshot, on_coordinator(restore.error()));
    TaskChain* donor = nullptr;
    if (kept_ && kept_->holds(restore->metadata().checkpoint_id, restore->dir())) donor = kept_->chain.get();
    else if (kept_) log_.debug("{}: the state kept from before the rescale is not that of {}: read from files",
                               chain_->label(), options_.restore.string());
    try {
      kept_groups_ = chain_->restore(*restore, donor);
    } catch (const Error& e) {
      throw Error(e.kind(), on_coordinator(e.what()));
    }
    if (!staged && !donor) continue_restored_chain(*restore);
    log_.debug("{} restored from {}{}{}", chain_->label(), options_.restore.string(),
               staged ? " (fetched from the coordinator)" : "",
               donor ? ", " + std::to_string(kept_groups_) + " key group(s) kept in memory" : "");
  }

  // On the address this host reaches the coordinator from, which the coordinator (and the
  // peers it tells) can reach back: loopback when the coordinator is on loopback or on ipc
  // (then it is on this host).
  std::string tcp_bind_endpoint() const {
    if (options_.coordinator.rfind("tcp://", 0) != 0) return "tcp://127.0.0.1:*";
    auto bind = transport::tcp_bind_endpoint_towards(options_.coordinator);
    if (!bind) throw Error(ErrorKind::Internal, "cannot choose an address for the input gate: " + bind.error());
    return *bind;
  }

  void run_source_loop() {
    operators::Source& source = *chain_->source();
    auto emit = emitter();
    state::Batch batch;
    const auto idle_timeout = std::chrono::milliseconds(chain_->source_idle_timeout_ms());
    auto last_data = Clock::now();
    bool idle = false;
    for (;;) {
      drain_control();
      take_triggered_checkpoints();
      report_snapshots();
      if (stop_requested_) break;
      if (source_halted_) {
        // After a stopping savepoint's barrier, or at the end of input when the job ends
        // with a savepoint: emit nothing more, and wait for the coordinator.
        auto now = Clock::now();
        router_->flush_due(now);
        heartbeat(now);
        wait_for_input(-1, now, std::chrono::milliseconds(50));
        continue;
      }
      batch.clear();
      auto status = source.poll(batch, settings_.batch_size);
      auto now = Clock::now();
      if (!batch.empty()) {
        state_changes();
        chain_->push(batch, emit);
        last_data = now;
        idle = false;
      }
      // The watermark follows the data, at least once per batch (SPEC §7).
      if (auto watermark = chain_->take_source_watermark()) advance_watermark(*watermark);
      if (status == operators::SourceStatus::End && savepoint_at_end_) {
        // SPEC §7: the run ends with a savepoint, not a drain; open windows wait in it. This
        // subtask sends nothing more, so downstream must not wait for its watermark.
        router_->flush_all();
        router_->send_idle();
        send(transport::ControlMessage{"EXHAUSTED", {}});
        source_halted_ = exhausted_ = true;
        continue;
      }
      if (status == operators::SourceStatus::End) break;
      if (idle_timeout.count() > 0 && !idle && now - last_data >= idle_timeout) {
        router_->send_idle();
        idle = true;
      }
      tick_processing_time(now);
      maybe_send_latency_marker(now);
      router_->flush_due(now);
      heartbeat(now);
      if (status == operators::SourceStatus::Idle) wait_for_input(source.readiness_fd(), now, source.idle_wait());
    }
  }

  void run_input_loop() {
    const int expected = job_->plan.input_channel_count(task_.chain, task_.subtask);
    watermarks_ = std::make_unique<WatermarkTracker>(expected);
    aligner_ = std::make_unique<BarrierAligner>(expected, exactly_once_);
    zmq::message_t message;
    while (ended_channels_ < expected) {
      auto now = Clock::now();
      auto timeout = aligner_->has_replay()
                         ? std::chrono::milliseconds(0)
                         : std::chrono::duration_cast<std::chrono::milliseconds>(until_next_timer(now));
      zmq::pollitem_t items[] = {{gate_->socket().handle(), 0, ZMQ_POLLIN, 0},
                                 {control_.handle(), 0, ZMQ_POLLIN, 0}};
      zmq::poll(items, 2, timeout);
      idle_ += Clock::now() - now;
      if (items[1].revents & ZMQ_POLLIN) drain_control();
      int frames = 0;
      for (; frames < kFramesPerTurn && ended_channels_ < expected; ++frames) {
        if (!aligner_->take_replay(message) && !gate_->try_receive(message)) break;
        handle_frame(std::move(message), expected);
        // A slow chain still reports every second: its figures are what shows it is slow.
        if (Clock::now() - last_heartbeat_ >= kHeartbeatEvery) {
          ++frames;
          break;
        }
      }
      ++input_polls_;
      if (frames == kFramesPerTurn) ++input_backlogged_; // more were waiting
      report_snapshots();
      now = Clock::now();
      tick_processing_time(now);
      router_->flush_due(now);
      heartbeat(now);
    }
  }

  void handle_frame(zmq::message_t&& message, int expected) {
    auto header = transport::read_frame_header(
        std::string_view(static_cast<const char*>(message.data()), message.size()));
    if (!header) throw Error(ErrorKind::Internal, "received a malformed data frame");
    if (aligner_->blocked(header->channel)) {
      aligner_->hold(std::move(message));
      return;
    }
    std::string_view payload(static_cast<const char*>(message.data()) + transport::kFrameHeaderSize,
                             message.size() - transport::kFrameHeaderSize);
    bytes_received_ += message.size();
    switch (header->kind) {
    case transport::FrameKind::EndOfInput: {
      state_changes(); // the job goes on to its end after all
      ++ended_channels_;
      log_.debug("end of input on channel {:#x} after {} frames ({} of {})", header->channel, header->sequence,
                 ended_channels_, expected);
      if (auto w = watermarks_->on_end(header->channel); w && ended_channels_ < expected) advance_watermark(*w);
      if (aligner_->on_end(header->channel) == BarrierAligner::Outcome::Complete) complete_alignment();
      return;
    }
    case transport::FrameKind::Watermark: {
      auto w = transport::read_watermark_payload(payload);
      if (!w) throw Error(ErrorKind::Internal, "received a malformed watermark frame");
      auto advanced = w->idle ? watermarks_->on_idle(header->channel)
                              : watermarks_->on_watermark(header->channel, w->watermark);
      if (advanced) advance_watermark(*advanced);
      return;
    }
    case transport::FrameKind::Barrier: {
      auto barrier = transport::read_barrier_payload(payload);
      if (!barrier) throw Error(ErrorKind::Internal, "received a malformed barrier frame");
      auto outcome = aligner_->on_barrier(header->channel, barrier->checkpoint_id);
      if (outcome == BarrierAligner::Outcome::Ignored) return;
      if (!first_barrier_at_) first_barrier_at_ = Clock::now();
      aligning_barrier_ = *barrier;
      if (outcome == BarrierAligner::Outcome::Complete) complete_alignment();
      return;
    }
    case transport::FrameKind::LatencyMarker: {
      auto created = transport::read_latency_marker_payload(payload);
      if (!created) throw Error(ErrorKind::Internal, "received a malformed latency marker");
      // Every node of the chain has handled what came before the marker by now.
      record_latency(wall_clock_us() - *created, 0);
      router_->send_latency_marker(*created);
      return;
    }
    case transport::FrameKind::Data: break;
    case transport::FrameKind::DataWithWatermark: break;
    }
    std::optional<std::int64_t> piggyback;
    std::size_t skip = transport::kFrameHeaderSize;
    if (header->kind == transport::FrameKind::DataWithWatermark) {
      piggyback = transport::read_piggyback_watermark(payload);
      if (!piggyback) throw Error(ErrorKind::Internal, "received a malformed data frame (no watermark)");
      skip += transport::kPiggybackWatermarkSize;
    }
    if (auto w = watermarks_->on_data(header->channel)) advance_watermark(*w);
    // Moving a small message moves its bytes (ZeroMQ keeps them inline): view it anew.
    auto owned = std::make_shared<zmq::message_t>(std::move(message));
    payload = std::string_view(static_cast<const char*>(owned->data()) + skip, owned->size() - skip);
    auto batch = state::decode_batch(payload, owned, names_);
    if (!batch) throw Error(ErrorKind::Internal, "received a corrupt batch: " + batch.error());
    state_changes();
    push_in_batches(*batch, header->input_index);
    if (piggyback)
      if (auto advanced = watermarks_->on_watermark(header->channel, *piggyback)) advance_watermark(*advanced);
  }

  // A message carries up to kBatchesPerMessage batches (output_router.hpp): the chain takes
  // them a batch_size at a time, as from a source, so that operators work on batches of the
  // size the job set (their per-batch scratch, the window's prefetching).
  void push_in_batches(const state::Batch& batch, std::uint16_t input_index) {
    if (batch.size() <= settings_.batch_size) {
      chain_->push(batch, emitter(), input_index);
      return;
    }
    for (std::size_t at = 0; at < batch.size(); at += settings_.batch_size) {
      state::Batch part;
      part.retain_memory_of(batch);
      const std::size_t end = std::min(batch.size(), at + settings_.batch_size);
      for (std::size_t k = at; k < end; ++k) part.add_shared(batch[k]);
      chain_->push(part, emitter(), input_index);
    }
  }

  // Every live input has delivered the barrier: snapshot, pass it on, go on with what waited.
  void complete_alignment() {
    if (aligner_->held() > 0)
      log_.debug("checkpoint {}: aligned, {} frame(s) held meanwhile", aligning_barrier_.checkpoint_id, aligner_->held());
    take_checkpoint(aligning_barrier_);
    aligner_->release();
  }

  // --- Checkpoints ---

  // A source task snapshots and injects the barrier for each TRIGGER received.
  void take_triggered_checkpoints() {
    while (!triggers_.empty()) {
      Trigger t = std::move(triggers_.front());
      triggers_.pop_front();
      take_checkpoint(t.barrier, t.savepoint);
      if (t.stop) source_halted_ = true;
    }
  }

  // The chain's state goes to the background writer; the barrier goes downstream after
  // everything emitted before it.
  // `savepoint`: the source's position must not need the job's spool files (only a source
  // task is told; the others' snapshots are the same either way).
  void take_checkpoint(const transport::BarrierPayload& barrier, bool savepoint = false, bool pass_barrier_on = true) {
    auto start = Clock::now();
    CheckpointTiming& timing = checkpoint_timing_[barrier.checkpoint_id];
    timing.started = first_barrier_at_.value_or(start);
    timing.alignment_ms = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(start - timing.started).count());
    timing.metrics = encode_metrics(chain_->metrics());
    first_barrier_at_.reset();
    SnapshotJob job;
    job.checkpoint_id = barrier.checkpoint_id;
    job.path = snapshot_dir(barrier) / task_snapshot_file(task_.chain, task_.subtask);
    job.header.job_name = job_->spec.name;
    job.header.checkpoint_id = barrier.checkpoint_id;
    job.header.created_at_ms = operators::wall_clock_ms();
    job.header.max_parallelism = static_cast<std::uint32_t>(job_->spec.max_parallelism);
    job.header.chain_id = static_cast<std::uint32_t>(task_.chain);
    job.header.subtask = static_cast<std::uint32_t>(task_.subtask);
    job.header.parallelism = static_cast<std::uint32_t>(job_->plan.chains[static_cast<std::size_t>(task_.chain)].parallelism);
    job.header.key_groups = chain_->key_groups();
    job.header.chain_nodes = chain_->node_names();
    // Deferred snapshots: groups the last checkpoint froze and neither the writer nor a change
    // has serialised yet are the task's to serialise now, before this checkpoint's bookkeeping
    // (plan) changes their change marks. Snapshots still queued for earlier checkpoints are
    // dropped first (their checkpoints were given up): their groups are abandoned, not
    // serialised here for nothing.
    if (snapshot_writer_) snapshot_writer_->drop_queued_before(barrier.checkpoint_id);
    const std::size_t late_groups = chain_->complete_deferred();
    const auto planning = Clock::now();
    const bool deferred = deferred_snapshots_of(job_->spec);
    auto plan =
        incremental_snapshots().plan(barrier.checkpoint_id, barrier.directory, savepoint, chain_->operators(), deferred);
    const auto planned = Clock::now();
    if (!snapshot_writer_) snapshot_writer_ = std::make_unique<AsyncSnapshotWriter>(uploader_.get());
    TaskChain::EdgeSegments edges = chain_->snapshot_edges(barrier.checkpoint_id, savepoint);
    const bool forked = fork_snapshot(job, edges, plan);
    std::size_t deferred_groups = 0;
    if (!forked) {
      std::vector<SnapshotSegment> operator_segments =
          deferred ? chain_->snapshot_operators_deferred(barrier.checkpoint_id, &plan) : chain_->snapshot_operators(&plan);
      if (auto stalls = chain_->deferred_stalls(barrier.checkpoint_id)) deferred_groups = stalls->groups;
      job.segments = TaskChain::assemble(std::move(edges), std::move(operator_segments));
      snapshot_writer_->submit(std::move(job));
    }
    previous_files_[barrier.checkpoint_id] = std::move(plan.previous);
    if (const operators::Source* source = chain_->source())
      referenced_files_[barrier.checkpoint_id] = source->referenced_files();
    if (pass_barrier_on) router_->send_barrier(barrier);
    if (barrier.stops_job) snapshot_state_ = barrier;
    else snapshot_state_.reset();
    const auto taken = Clock::now();
    timing.pause_ms = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(taken - start).count());
    auto ms = [](Clock::duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); };
    log_.debug("checkpoint {}: state taken in {} ms{}{}{} (earlier freeze {} ms, changes {} ms, segments {} ms)",
               barrier.checkpoint_id, timing.pause_ms, forked ? " (forked)" : "",
               deferred_groups > 0 ? " (" + std::to_string(deferred_groups) + " key group(s) deferred)" : "",
               late_groups > 0 ? ", " + std::to_string(late_groups) +
                                     " group(s) of the checkpoint before still frozen were serialised or copied first"
                               : "",
               ms(planning - start), ms(planned - planning), ms(taken - planned));
  }

  IncrementalSnapshots& incremental_snapshots() {
    if (!incremental_) {
      IncrementalSettings settings = incremental_settings_of(job_->spec);
      // Files sent to the coordinator are full snapshots, for now (incremental_snapshots.hpp).
      if (options_.bootstrap && options_.bootstrap->checkpoint_storage_coordinator) settings.enabled = false;
      incremental_.emplace(settings, task_snapshot_file(task_.chain, task_.subtask), chain_->key_groups());
    }
    return *incremental_;
  }

  // After a restore from the newest checkpoint of this job (`restart`) or of an earlier run of
  // the same pipeline name (`run --resume`), by a task the same as the one that wrote it: its
  // first checkpoint builds on the chain it restored instead of writing all its state
  // (incremental_snapshots.hpp). That is as safe as the restore itself: the chain's files are
  // the ones just restored, read the same way again by the next restore, and the task must
  // match in chain, nodes, subtask, parallelism and key groups (an edited pipeline that moves
  // state restarts full). A savepoint (the user's, relocatable: nothing may point into it), an
  // older checkpoint (which the coordinator may prune while the new one builds on it), another
  // pipeline's checkpoint, or a rescale that kept this worker: full, as before.
  void continue_restored_chain(const CheckpointRestore& restore) {
    const CheckpointMetadata& m = restore.metadata();
    if (m.kind != "checkpoint" || (m.job_id != options_.run_tag && m.job_name != job_->spec.name)) return;
    const auto completed = completed_checkpoints(restore.dir().parent_path());
    if (completed.empty() || completed.back().lexically_normal() != restore.dir().lexically_normal()) return;
    const std::string own = task_snapshot_file(task_.chain, task_.subtask);
    const int parallelism = job_->plan.chains[static_cast<std::size_t>(task_.chain)].parallelism;
    std::size_t task = m.tasks.size();
    for (std::size_t k = 0; k < m.tasks.size(); ++k)
      if (m.tasks[k].file == own && m.tasks[k].subtask == task_.subtask && m.tasks[k].parallelism == parallelism &&
          m.tasks[k].nodes == chain_->node_names())
        task = k;
    if (task == m.tasks.size()) return;
    const auto readers = restore.task_files(task);
    const state::SnapshotHeader& header = readers.back()->header();
    if (header.chain_id != static_cast<std::uint32_t>(task_.chain) || header.key_groups != chain_->key_groups()) return;
    std::vector<CheckpointTaskFile::PreviousFile> files = m.tasks[task].previous;
    files.push_back({"../" + restore.dir().filename().string() + "/" + own, m.tasks[task].bytes});
    // The nodes whose keyed state a file must hold for a group to be whole in it.
    std::vector<std::string> stateful;
    const std::vector<std::string> names = chain_->node_names();
    const std::size_t offset = chain_->source() ? 1 : 0;
    const auto ops = chain_->operators();
    for (std::size_t k = 0; k < ops.size() && offset + k < names.size(); ++k)
      if (ops[k]->has_state()) stateful.push_back(names[offset + k]);
    // A group with no keyed segment in any file is empty, held whole by the chain's first
    // file: a full snapshot (which leaves empty groups out), as every other file writes a
    // group whole with a segment, empty or not. Without this, a chain that still begins with
    // its full file would be written full again whenever a group is empty (few keys).
    auto has_keyed = [&](std::size_t f, const std::string& node, std::uint32_t group) {
      return readers[f]->find(node, state::SegmentKind::Keyed, group) != nullptr;
    };
    auto holds_whole = [&](std::size_t f, std::uint32_t group) {
      return std::all_of(stateful.begin(), stateful.end(), [&](const std::string& node) {
        if (has_keyed(f, node, group)) return true;
        if (f != 0) return false;
        for (std::size_t other = 1; other < readers.size(); ++other)
          if (has_keyed(other, node, group)) return false;
        return true;
      });
    };
    if (!incremental_snapshots().continue_restored(restore.dir().parent_path(), m.checkpoint_id, std::move(files),
                                                   holds_whole))
      return;
    // The restore marked every group changed; the chain holds them as they are.
    std::vector<std::uint32_t> groups;
    std::vector<state::GroupEntries> entries;
    for (operators::Operator* op : ops) {
      op->take_changed_key_groups(groups);
      op->take_changed_entries(entries, /*deferred=*/false);
    }
    log_.debug("checkpoints go on with the chain of {} ({} file(s))", restore.dir().filename().string(),
               readers.size());
  }

  // [checkpoint] snapshot = "fork": a child process serialises and writes the operators'
  // state (forked_snapshot.hpp) while the task goes on. Not while an earlier forked snapshot
  // of this task is still being written (at most one copy-on-write image at a time), nor for
  // a chain without operator state (nothing to gain); then, or when fork fails, the task
  // serialises its state itself, as with "copy". True when the child took the job.
  bool fork_snapshot(SnapshotJob& job, TaskChain::EdgeSegments& edges, const IncrementalSnapshots::Plan& plan) {
    if (!fork_snapshots_of(job_->spec) || snapshot_writer_->forks_in_flight() > 0) return false;
    const auto ops = chain_->operators();
    if (std::none_of(ops.begin(), ops.end(), [](const operators::Operator* op) { return op->has_state(); }))
      return false;
    if (const std::string why = ForkedSnapshot::unavailable_reason(); !why.empty()) {
      if (!fork_unavailable_reported_)
        log_.warn("snapshot = \"fork\" is not available: {}; the task takes its state itself", why);
      fork_unavailable_reported_ = true;
      return false;
    }
    auto child = ForkedSnapshot::start(
        job, [&] { return TaskChain::assemble(std::move(edges), chain_->snapshot_operators(&plan)); },
        checkpoint_timeout_of(job_->spec));
    if (!child) {
      log_.warn("checkpoint {}: {}; the task takes its state itself", job.checkpoint_id, child.error());
      return false;
    }
    snapshot_writer_->submit(std::move(job), std::move(*child));
    return true;
  }

  // Where the snapshot file is written: the checkpoint's directory, or with
  // [checkpoint] storage = "coordinator" a staging directory of this worker's own, from which
  // the file travels to the coordinator (snapshot_uploader.hpp) before the ACK.
  std::filesystem::path snapshot_dir(const transport::BarrierPayload& barrier) {
    if (!options_.bootstrap || !options_.bootstrap->checkpoint_storage_coordinator) return barrier.directory;
    if (!staging_) {
      auto staging = StagingDir::create("streamctl-snapshots");
      if (!staging) throw Error(ErrorKind::Internal, staging.error());
      staging_ = std::make_unique<StagingDir>(std::move(*staging));
      uploader_ = std::make_unique<SnapshotUploader>(context_, options_.coordinator, security_, options_.task,
                                                     options_.attempt);
    }
    return staging_->path();
  }

  // Tells the coordinator which snapshot files are durable (ACK) or could not be written.
  void report_snapshots() {
    if (!snapshot_writer_) return;
    for (const auto& done : snapshot_writer_->take_completed()) {
      auto files = referenced_files_.extract(done.checkpoint_id);
      auto previous = previous_files_.extract(done.checkpoint_id);
      auto timing = checkpoint_timing_.extract(done.checkpoint_id);
      if (!done.error.empty()) {
        send(transport::ControlMessage{"DECLINE", {}}
                 .set("checkpoint", std::to_string(done.checkpoint_id))
                 .set("message", done.error));
        continue;
      }
      if (incremental_) incremental_->written(done.checkpoint_id, done.bytes);
      // Deferred snapshots: what the frozen groups cost the task after the barrier, final now
      // that the writer has taken them all.
      std::uint64_t stall_ms = 0, copied_bytes = 0;
      if (auto stalls = chain_->deferred_stalls(done.checkpoint_id)) {
        const auto ms = [](std::chrono::nanoseconds d) {
          return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
        };
        stall_ms = ms(stalls->longest);
        copied_bytes = stalls->copied_bytes;
        log_.debug("checkpoint {}: deferred groups written; longest stall {} ms after the barrier ({} ms in all, "
                   "{} ms of it waiting for the writer; {} of {} group(s) serialised by the task and {} copied "
                   "({:.1f} MB), {} by the next checkpoint or the end)",
                   done.checkpoint_id, stall_ms, ms(stalls->total), ms(stalls->waited), stalls->groups_by_task,
                   stalls->groups, stalls->groups_copied, static_cast<double>(stalls->copied_bytes) / 1e6,
                   stalls->late_groups);
      }
      // The spool files the snapshot's source position needs, and the earlier files it builds
      // on, for the checkpoint's _metadata.
      send(transport::ControlMessage{"ACK", {}}
               .set("checkpoint", std::to_string(done.checkpoint_id))
               .set("file", done.file_name)
               .set("previous", previous ? encode_previous_files(previous.mapped()) : std::string())
               .set("spool_files", files ? encode_spool_files(files.mapped()) : std::string())
               .set("bytes", std::to_string(done.bytes))
               .set("raw_bytes", std::to_string(done.raw_bytes))
               .set("write_ms", std::to_string(static_cast<long long>(done.seconds * 1000)))
               .set("metrics", timing ? timing.mapped().metrics : std::string())
               .set("alignment_ms", timing ? std::to_string(timing.mapped().alignment_ms) : "0")
               .set("pause_ms", timing ? std::to_string(timing.mapped().pause_ms) : "0")
               .set("stall_ms", std::to_string(stall_ms))
               .set("copied_bytes", std::to_string(copied_bytes))
               .set("duration_ms", timing ? std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                               Clock::now() - timing.mapped().started)
                                                               .count())
                                          : "0"));
    }
  }

  // ZeroMQ may drop what a peer has not read yet when the sending socket goes away (libzmq
  // #1264), whatever the linger. So a finished worker keeps its sockets open until the
  // coordinator releases it, which it does once every task has finished, that is once every
  // end-of-input has been read.
  //
  // Meanwhile the job's final checkpoint (a TRIGGER marked final, sent to every task once all
  // have finished) snapshots what the end of input left: the sources' end positions, the state
  // the operators keep, and the sink's output since the last checkpoint, prepared. RELEASE, sent
  // once it is complete, publishes that output (finish_sink), so a worker that dies while
  // publishing it is restarted from this checkpoint and publishes the rest, rather than the job
  // failing with part of its output out.
  void await_release() {
    for (;;) {
      report_snapshots();
      auto message = receive_control(std::chrono::milliseconds(200));
      if (message && message->type == "RELEASE") return;
      if (message) handle_control(*message);
      if (final_trigger_) {
        take_checkpoint(*final_trigger_, final_trigger_savepoint_, /*pass_barrier_on=*/false);
        final_trigger_.reset();
      }
    }
  }

  // Something reaches the chain: its state may no longer be that of its last snapshot.
  void state_changes() { snapshot_state_.reset(); }

  void advance_watermark(std::int64_t watermark) {
    watermark_ = watermark;
    state_changes();
    chain_->push_watermark(watermark, emitter());
    router_->send_watermark(watermark);
  }

  TaskChain::Emit emitter() {
    return [this](const state::Batch& b, int port) { router_->emit(b, port); };
  }

  // Processing-time timers (windows without event time, ttl) fire from here.
  void tick_processing_time(Clock::time_point now) {
    // Not after the snapshot of a checkpoint that stops the job: its state stays that of the
    // checkpoint, for a rescale that keeps this worker (kept_chain.hpp); what the timers would
    // emit after it is never published anyway.
    if (now < next_tick_ || snapshot_state_) return;
    next_tick_ = now + kProcessingTimeTick;
    chain_->push_processing_time(operators::wall_clock_ms(), emitter());
  }

  Clock::duration until_next_timer(Clock::time_point now) const {
    Clock::time_point next = std::min(last_heartbeat_ + kHeartbeatEvery, next_tick_);
    if (auto due = router_->next_deadline(); due && *due < next) next = *due;
    return next > now ? next - now : Clock::duration::zero();
  }

  // The source has nothing now: sleep until it may, a control message arrives, or a timer.
  void wait_for_input(int fd, Clock::time_point now, std::chrono::milliseconds longest = std::chrono::milliseconds(1)) {
    auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(until_next_timer(now));
    if (fd < 0) timeout = std::min(timeout, longest);
    zmq::pollitem_t items[] = {{control_.handle(), 0, ZMQ_POLLIN, 0}, {nullptr, fd, ZMQ_POLLIN, 0}};
    auto start = Clock::now();
    zmq::poll(items, fd >= 0 ? 2 : 1, timeout);
    idle_ += Clock::now() - start;
  }

  void wait_writable(zmq::socket_t& socket) {
    auto start = Clock::now();
    zmq::pollitem_t items[] = {{socket.handle(), 0, ZMQ_POLLOUT, 0}, {control_.handle(), 0, ZMQ_POLLIN, 0}};
    zmq::poll(items, 2, std::chrono::milliseconds(100));
    if (items[1].revents & ZMQ_POLLIN) drain_control();
    auto now = Clock::now();
    backpressured_ += now - start;
    heartbeat(now);
  }

  void heartbeat(Clock::time_point now) {
    send_tapped(now);
    if (now - last_heartbeat_ < kHeartbeatEvery) return;
    last_heartbeat_ = now;
    chain_->check_sink_output();
    transport::ControlMessage beat{"HEARTBEAT", {}};
    beat.set("metrics", encode_metrics(chain_->metrics(TaskChain::StateFigures::recent)));
    load(now).write_to(beat);
    if (!latency_.empty()) beat.set("latency", encode_latency(latency_figures()));
    // For `status` while the job runs (a few short lines; FINISHED sends the final ones).
    if (auto presence = chain_->field_presence().reports(); !presence.empty())
      beat.set("unseen_fields", encode_field_presence(presence));
    send(beat);
  }

  // Copies of records for `streamctl tap` (tap_protocol.hpp), every kTapFlushEvery or `all`
  // that wait.
  void send_tapped(Clock::time_point now, bool all = false) {
    if (!tap_ || !tap_->active()) return;
    for (auto& m : tap_->take_due(now, all)) send(std::move(m));
  }

  // --- Latency markers ([metrics] latency_interval; transport/frame.hpp) ---

  static std::int64_t wall_clock_us() {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

  // A source task makes a marker every latency_interval. The operators fused after the
  // source see it at once, as they see the records before it: latency 0.
  void maybe_send_latency_marker(Clock::time_point now) {
    if (settings_.latency_interval.count() <= 0 || now < next_latency_marker_) return;
    next_latency_marker_ = now + settings_.latency_interval;
    std::int64_t created = wall_clock_us();
    record_latency(0, 1);
    router_->send_latency_marker(created);
  }

  // Into the window of every node of the chain from `first` on.
  void record_latency(std::int64_t latency_us, std::size_t first) {
    if (latency_.empty()) latency_.resize(chain_->node_names().size());
    for (std::size_t k = first; k < latency_.size(); ++k) latency_[k].add(latency_us);
  }

  std::vector<NodeLatency> latency_figures() const {
    std::vector<NodeLatency> out;
    auto names = chain_->node_names();
    for (std::size_t k = 0; k < latency_.size() && k < names.size(); ++k)
      if (latency_[k].markers() > 0) out.emplace_back(names[k], latency_[k].figures());
    return out;
  }

  // Busy is what is neither idle nor backpressured, since the task's loop began.
  TaskLoad load(Clock::time_point now) const {
    auto ms = [](Clock::duration d) {
      return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
    };
    TaskLoad l;
    l.idle_ms = ms(idle_);
    l.backpressured_ms = ms(backpressured_);
    std::uint64_t elapsed = ms(now - loop_started_);
    l.busy_ms = elapsed > l.idle_ms + l.backpressured_ms ? elapsed - l.idle_ms - l.backpressured_ms : 0;
    l.bytes_in = bytes_received_;
    l.input_polls = input_polls_;
    l.input_waiting = input_backlogged_;
    if (router_) {
      l.bytes_out = router_->bytes_sent();
      l.output_sends = router_->batches_sent();
      l.output_full = router_->sends_found_full();
    }
    l.watermark = watermark_;
    return l;
  }

  void drain_control() {
    zmq::message_t message;
    while (control_.recv(message, zmq::recv_flags::dontwait)) {
      auto decoded = transport::decode_control(message.to_string_view());
      if (decoded) handle_control(*decoded);
    }
  }

  std::optional<transport::ControlMessage> receive_control(std::chrono::milliseconds timeout) {
    zmq::pollitem_t items[] = {{control_.handle(), 0, ZMQ_POLLIN, 0}};
    if (zmq::poll(items, 1, timeout) == 0) return std::nullopt;
    zmq::message_t message;
    if (!control_.recv(message, zmq::recv_flags::dontwait)) return std::nullopt;
    return transport::decode_control(message.to_string_view());
  }

  void handle_control(const transport::ControlMessage& message) {
    if (message.type == "CANCEL")
      throw Cancelled{static_cast<std::uint64_t>(std::max<std::int64_t>(0, message.get_int("completed", 0)))};
    if (message.type == "HALT") throw Halted{message.get("park") == "1"};
    if (message.type == "STOP") stop_requested_ = true;
    if (message.type == "TAP" && tap_) tap_->open(message, Clock::now());
    if (message.type == "UNTAP" && tap_) tap_->close(message.get("tap"));
    if (message.type == "RESUME") {
      // The checkpoint that was to stop the job failed: it goes on (every task is told).
      snapshot_state_.reset();
      if (!exhausted_) source_halted_ = false;
    }
    if (message.type == "TRIGGER" && chain_ && message.get("final") == "1") {
      transport::BarrierPayload barrier;
      barrier.checkpoint_id = static_cast<std::uint64_t>(message.get_int("checkpoint", 0));
      barrier.directory = message.get("dir");
      if (barrier.checkpoint_id > 0 && !barrier.directory.empty()) final_trigger_ = std::move(barrier);
      final_trigger_savepoint_ = message.get("savepoint") == "1";
      return;
    }
    if (message.type == "TRIGGER" && chain_ && chain_->source() != nullptr) {
      Trigger t;
      t.barrier.checkpoint_id = static_cast<std::uint64_t>(message.get_int("checkpoint", 0));
      t.barrier.directory = message.get("dir");
      t.stop = message.get("stop") == "1";
      t.barrier.stops_job = t.stop;
      t.savepoint = message.get("savepoint") == "1";
      if (t.barrier.checkpoint_id > 0 && !t.barrier.directory.empty()) triggers_.push_back(std::move(t));
    }
    if (message.type == "COMMIT" && chain_) {
      auto id = static_cast<std::uint64_t>(message.get_int("checkpoint", 0));
      chain_->commit(id);
      if (incremental_) incremental_->completed(id);
    }
  }

  // Every message names its task and the attempt it belongs to, so that the coordinator
  // ignores what a worker of an earlier attempt still says.
  void send(transport::ControlMessage message) {
    message.set("task", std::to_string(options_.task)).set("attempt", std::to_string(options_.attempt));
    std::string text = transport::encode_control(message);
    control_.send(zmq::buffer(text), zmq::send_flags::dontwait);
  }

  const WorkerOptions& options_;
  spdlog::logger& log_;
  zmq::context_t context_;
  zmq::socket_t control_;
  transport::LinkSecurity security_ = transport::LinkSecurity::plain();
  RefusalLog refusals_;
  std::unique_ptr<transport::ZapHandler> zap_;
  std::unique_ptr<operators::Registry> registry_;
  std::unique_ptr<LoadedJob> job_;
  RuntimeSettings settings_;
  pipeline::Task task_;
  std::optional<KeptChain> kept_; // from before a rescale, until the restore
  // Shared with the chain kept from before a rescale, whose state names fields by its ids.
  std::unique_ptr<state::FieldNames> field_names_;
  state::FieldNames& names_;
  std::unique_ptr<RecordTap> tap_; // before chain_, which points at it
  std::unique_ptr<TaskChain> chain_;
  std::unique_ptr<transport::InputGate> gate_;
  std::unique_ptr<OutputRouter> router_;
  bool stop_requested_ = false;
  bool exactly_once_ = true;
  bool savepoint_at_end_ = false; // the job ends with a savepoint, not a drain
  bool source_halted_ = false;    // a source that emits nothing more
  bool exhausted_ = false;        // ... because its input has ended
  struct Trigger {
    transport::BarrierPayload barrier;
    bool stop = false; // a savepoint that stops the job: the source emits nothing after it
    bool savepoint = false;
  };
  std::deque<Trigger> triggers_;
  // The barrier of the last snapshot when it stops the job and nothing has reached the chain
  // since: its operators hold exactly that checkpoint's state (kept_chain.hpp).
  std::optional<transport::BarrierPayload> snapshot_state_;
  std::size_t kept_groups_ = 0;            // key groups the restore took from kept_
  std::optional<Reassignment> reassignment_; // after park(): the next task
  std::optional<transport::BarrierPayload> final_trigger_; // the job's final checkpoint
  bool final_trigger_savepoint_ = false;                   // ... is a savepoint
  std::unique_ptr<StagingDir> staging_;             // storage = "coordinator": files before upload
  std::unique_ptr<SnapshotUploader> uploader_;      // ... and what sends them
  std::unique_ptr<AsyncSnapshotWriter> snapshot_writer_; // uses the two above
  std::map<std::uint64_t, std::vector<std::string>> referenced_files_; // by checkpoint, until reported
  // Incremental checkpoints: what each snapshot writes and builds on; made at the first one.
  std::optional<IncrementalSnapshots> incremental_;
  bool fork_unavailable_reported_ = false; // snapshot = "fork" in a build that cannot: said once
  std::map<std::uint64_t, std::vector<CheckpointTaskFile::PreviousFile>> previous_files_; // until reported
  std::unique_ptr<LivenessBeacon> beacon_;
  std::unique_ptr<WatermarkTracker> watermarks_;
  std::unique_ptr<BarrierAligner> aligner_;
  transport::BarrierPayload aligning_barrier_;
  int ended_channels_ = 0;
  Clock::time_point last_heartbeat_{};
  Clock::time_point next_tick_{};
  // For TaskLoad: see load().
  Clock::time_point loop_started_ = Clock::now();
  Clock::duration idle_{};
  Clock::duration backpressured_{};
  std::uint64_t bytes_received_ = 0;
  std::uint64_t input_polls_ = 0;
  std::uint64_t input_backlogged_ = 0;
  std::optional<std::int64_t> watermark_;
  std::vector<LatencyWindow> latency_; // by node of the chain, once a marker has been seen
  Clock::time_point next_latency_marker_{};
  // Per checkpoint until its ACK: when its barrier arrived (or was injected), how long the
  // inputs took to align, and the chain's counters at the barrier, which the checkpoint covers.
  struct CheckpointTiming {
    Clock::time_point started;
    std::uint64_t alignment_ms = 0;
    std::uint64_t pause_ms = 0; // taking the state, in the task (take_checkpoint)
    std::string metrics;
  };
  std::map<std::uint64_t, CheckpointTiming> checkpoint_timing_;
  std::optional<Clock::time_point> first_barrier_at_; // of the alignment in progress
};

} // namespace

int run_worker(const WorkerOptions& options, spdlog::logger& log) {
  WorkerOptions current = options;
  std::optional<KeptChain> kept;
  for (;;) {
    Reassignment next;
    {
      Worker worker(current, log, std::move(kept));
      int code = worker.run();
      if (!worker.reassignment()) return code;
      next = *worker.reassignment();
      kept = worker.take_kept();
    } // its sockets close here, before the next task's connect under their own identities
    log.debug("task {} of attempt {} runs task {} of attempt {} now", current.task, current.attempt,
              next.task, next.attempt);
    current.task = next.task;
    current.attempt = next.attempt;
    current.restore = next.restore;
  }
}

} // namespace streamctl::runtime
