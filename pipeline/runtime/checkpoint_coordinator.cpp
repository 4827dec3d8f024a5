#include "pipeline/runtime/checkpoint_coordinator.hpp"

#include <ctime>

#include "operators/wall_clock.hpp"
#include "pipeline/runtime/checkpoint_metadata.hpp"
#include "pipeline/runtime/checkpoint_restore.hpp"
#include "pipeline/runtime/incremental_snapshots.hpp"
#include "pipeline/runtime/utc_clock.hpp"
#include "pipeline/runtime/worker_reuse.hpp"
#include "pipeline/spec/schema_check.hpp"
#include "state/error.hpp"

namespace streamctl::runtime {

namespace {


transport::ControlMessage error_reply(const std::string& message) {
  return transport::ControlMessage{"ERROR", {}}.set("message", message);
}

} // namespace

void check_restore(const std::filesystem::path& path, const pipeline::PipelineSpec& spec,
                   bool allow_non_restored) {
  auto restore = CheckpointRestore::open(path);
  if (!restore) throw Error(ErrorKind::Snapshot, restore.error());
  // Every segment's checksums, before anything starts: a damaged file is refused here with
  // exit 3, not found by a worker half-way through its restore.
  if (auto ok = restore->verify(); !ok) throw Error(ErrorKind::Snapshot, ok.error());
  auto problems = check_restore_compatible(*restore, spec, allow_non_restored);
  if (!problems.empty()) throw Error(ErrorKind::Snapshot, pipeline::detail::join(problems, "\n"));
}

CheckpointCoordinator::CheckpointCoordinator(const LoadedJob& job,
                                             const CheckpointSettings& settings, std::string job_id,
                                             std::optional<std::filesystem::path> latest,
                                             WorkerPool& workers, ControlChannel& control,
                                             SpoolJanitor& spool, CheckpointListener& listener,
                                             spdlog::logger& log)
    : job_(job), settings_(settings), job_id_(std::move(job_id)), workers_(workers),
      control_(control), spool_(spool), listener_(listener), log_(log),
      next_id_(next_checkpoint_id(settings.root)), latest_completed_(std::move(latest)) {}

void CheckpointCoordinator::begin_attempt(const std::filesystem::path& restored_from) {
  restored_from_ = restored_from;
  exhausted_sources_ = 0;
}

void CheckpointCoordinator::maybe_trigger(Clock::time_point now, bool stopping) {
  if (!enabled() || pending_ || stopping || now < next_trigger_) return;
  next_trigger_ = now + settings_.interval;
  if (exhausted_sources_ > 0 || !workers_.none_finished()) return;
  trigger({.dir = next_checkpoint_dir()});
}

void CheckpointCoordinator::check_timeout(Clock::time_point now) {
  if (pending_ && now >= pending_->deadline)
    abort_pending("not every task acknowledged it within [checkpoint] timeout (" +
                      std::to_string(settings_.timeout.count()) + " ms)",
                  true);
}

Clock::time_point CheckpointCoordinator::next_duty(Clock::time_point fallback) const {
  if (enabled() && !pending_) fallback = std::min(fallback, next_trigger_);
  if (pending_) fallback = std::min(fallback, pending_->deadline);
  return fallback;
}

bool CheckpointCoordinator::trigger(Request request) {
  std::uint64_t id = next_id_++;
  const char* what = request.savepoint ? "savepoint" : "checkpoint";
  std::error_code ec;
  std::filesystem::create_directories(request.dir, ec);
  if (ec) {
    std::string why = "cannot create '" + request.dir.string() + "': " + ec.message();
    log_.error("{} {} failed: {}; the job goes on", what, id, why);
    if (!request.client.empty()) control_.send(request.client, error_reply(why));
    return false;
  }
  transport::ControlMessage message{"TRIGGER", {}};
  message.set("checkpoint", std::to_string(id))
      .set("dir", request.dir.string())
      .set("stop", request.stop_after ? "1" : "0")
      // A savepoint must not need the job's spool files: sources copy what they still need
      // into their position (spooled_line_source.hpp).
      .set("savepoint", request.savepoint ? "1" : "0");
  if (request.final) message.set("final", "1");
  std::string dir = request.dir.string();
  bool every_task = request.final;
  PendingCheckpoint p;
  p.id = id;
  p.request = std::move(request);
  p.started = Clock::now();
  p.deadline = p.started + settings_.timeout;
  p.files.resize(workers_.size());
  p.figures.resize(workers_.size());
  pending_ = std::move(p);
  if (every_task)
    workers_.send_all(message);
  else
    workers_.send_sources(message);
  log_.debug("{} {} triggered into {}", what, id, dir);
  return true;
}

void CheckpointCoordinator::on_ack(std::size_t task, const transport::ControlMessage& m) {
  if (!pending_ || static_cast<std::uint64_t>(m.get_int("checkpoint", 0)) != pending_->id) return;
  if (pending_->files[task]) return;
  const TaskRuntime& t = workers_[task];
  const auto& chain = job_.plan.chains[static_cast<std::size_t>(t.task->chain)];
  CheckpointTaskFile f;
  f.file = m.get("file");
  for (std::size_t n : chain.nodes)
    f.nodes.push_back(job_.spec.nodes[n].name);
  f.subtask = t.task->subtask;
  f.parallelism = chain.parallelism;
  f.bytes = static_cast<std::uint64_t>(m.get_int("bytes", 0));
  f.spool_files = decode_spool_files(m.get("spool_files"));
  auto previous = decode_previous_files(m.get("previous"));
  if (!previous) {
    abort_pending(t.label + " named earlier files its snapshot builds on that are no checkpoint's", true);
    return;
  }
  f.previous = std::move(*previous);
  f.counts = counts_of_task_ ? counts_of_task_(t, m.get("metrics")) : m.get("metrics");
  pending_->figures[task] = CheckpointFigures{pending_->id,
                                              static_cast<std::uint64_t>(m.get_int("duration_ms", 0)),
                                              static_cast<std::uint64_t>(m.get_int("alignment_ms", 0)),
                                              f.bytes,
                                              static_cast<std::uint64_t>(m.get_int("pause_ms", 0)),
                                              static_cast<std::uint64_t>(m.get_int("raw_bytes", 0)),
                                              static_cast<std::uint64_t>(m.get_int("stall_ms", 0)),
                                              static_cast<std::uint64_t>(m.get_int("copied_bytes", 0))};
  pending_->files[task] = std::move(f);
  if (++pending_->acked == workers_.size()) complete();
}

namespace {
// The first `previous` file of `metadata` (to be written into `dir`) that is not there with
// the size the task gave, as a message; empty when all are.
std::string missing_previous_file(const std::filesystem::path& dir, const CheckpointMetadata& metadata) {
  for (const auto& task : metadata.tasks)
    for (const auto& previous : task.previous) {
      std::error_code ec;
      auto size = std::filesystem::file_size(dir / previous.path, ec);
      if (ec || size != previous.bytes)
        return "task '" + task.file + "' builds on " + (dir / previous.path).lexically_normal().string() +
               ", which is no longer there as it was";
    }
  return {};
}
} // namespace

void CheckpointCoordinator::on_decline(const TaskRuntime& task,
                                       const transport::ControlMessage& m) {
  if (pending_ && static_cast<std::uint64_t>(m.get_int("checkpoint", 0)) == pending_->id)
    abort_pending(task.label + " could not write its snapshot: " + m.get("message"), true);
}

void CheckpointCoordinator::on_source_exhausted() {
  if (++exhausted_sources_ < workers_.source_count()) return;
  abort_pending("the input has ended", false);
  log_.info("all input read: taking a savepoint instead of draining");
  if (!trigger({.dir = savepoint_dir(), .savepoint = true, .stop_after = true, .at_end = true}))
    listener_.drain_instead();
}

// Every task's file is durable: _metadata, written last, makes the checkpoint complete;
// then the sinks may publish what it covers (two-phase commit).
void CheckpointCoordinator::complete() {
  PendingCheckpoint p = std::move(*pending_);
  pending_.reset();
  const Request& r = p.request;
  CheckpointMetadata metadata;
  metadata.kind = r.savepoint ? "savepoint" : "checkpoint";
  metadata.job_name = job_.spec.name;
  metadata.job_id = job_id_;
  metadata.checkpoint_id = p.id;
  metadata.created_at_ms = operators::wall_clock_ms();
  metadata.max_parallelism = job_.spec.max_parallelism;
  std::uint64_t bytes = 0;
  for (auto& f : p.files) {
    bytes += f->bytes;
    metadata.tasks.push_back(std::move(*f));
  }
  // An incremental snapshot builds on a checkpoint its task knew complete; a prune since then
  // (a newer checkpoint completed before the task heard of it) may have deleted the files. The
  // checkpoint is then given up, never completed with a reference that leads nowhere; the
  // task's next one builds on the newer checkpoint.
  if (std::string missing = missing_previous_file(r.dir, metadata); !missing.empty()) {
    pending_ = std::move(p);
    abort_pending(missing, true);
    return;
  }
  if (auto ok = write_metadata(r.dir, metadata); !ok) {
    pending_ = std::move(p);
    abort_pending(ok.error(), true);
    return;
  }
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - p.started).count();
  if (r.savepoint)
    log_.info("savepoint {} complete: {} ({} bytes, {} ms)", p.id, r.dir.string(), bytes, ms);
  else
    log_.debug("checkpoint {} complete: {} bytes in {} ms", p.id, bytes, ms);
  latest_completed_ = r.dir;
  ++completed_count_;
  workers_.note_completed(p.id); // a CANCEL from now on keeps its prepared output (Sink::cancel)
  for (std::size_t k = 0; k < p.figures.size() && k < workers_.size(); ++k) workers_[k].last_checkpoint = p.figures[k];
  listener_.checkpoint_completed(r.dir);
  // After a final checkpoint the sinks publish at RELEASE, once the coordinator has recorded
  // that the job publishes its final output (final_publish.hpp).
  if (!r.final)
    workers_.send_all(
        transport::ControlMessage{"COMMIT", {}}.set("checkpoint", std::to_string(p.id)));
  if (!r.savepoint) {
    prune();
    spool_.sweep_live(restored_from_);
  }
  if (p.request.rescaled) {
    std::vector<int> park;
    if (keep_workers_on_rescale_)
      for (const auto& reuse : plan_worker_reuse(job_, *p.request.rescaled)) park.push_back(reuse.old_task);
    workers_.halt_all(park);
    // The sources stopped emitting at the savepoint's barrier.
    listener_.rescale_ready(std::move(*p.request.rescaled), r.client, p.started);
    return;
  }
  if (!r.client.empty())
    control_.send(r.client, transport::ControlMessage{"OK", {}}.set("path", r.dir.string()));
  if (r.stop_after) {
    workers_.halt_all();
    listener_.stopped_at(r.dir);
  }
}

void CheckpointCoordinator::abort_pending(const std::string& why, bool error) {
  if (!pending_) return;
  PendingCheckpoint p = std::move(*pending_);
  pending_.reset();
  const Request& r = p.request;
  const char* what = r.savepoint ? "savepoint" : "checkpoint";
  if (error) ++failed_count_;
  if (error)
    log_.error("{} {} failed: {}; the job goes on", what, p.id, why);
  else
    log_.debug("{} {} given up: {}", what, p.id, why);
  std::error_code ec;
  if (!r.savepoint || r.dir.filename().string().rfind("savepoint-", 0) == 0)
    std::filesystem::remove_all(r.dir, ec);
  tell_client_failed(p.request, why);
  if (!r.stop_after) return;
  if (r.at_end) {
    log_.error("the {} that was to stop the job failed: draining the job instead", what);
    listener_.drain_instead();
  } else {
    // The sources stopped emitting for a stop that will not happen: let them go on.
    // Every task: those past the snapshot hold their processing-time timers until told.
    workers_.send_all(transport::ControlMessage{"RESUME", {}});
  }
}

void CheckpointCoordinator::answer_pending_client(const std::string& why) {
  if (pending_) tell_client_failed(pending_->request, why);
}

void CheckpointCoordinator::tell_client_failed(Request& r, const std::string& why) {
  if (r.client.empty()) return;
  control_.send(r.client, error_reply((r.savepoint ? "savepoint" : "checkpoint") + std::string(" failed: ") + why));
  r.client.clear();
}

std::filesystem::path CheckpointCoordinator::next_checkpoint_dir() const {
  return settings_.root / ("chk-" + std::to_string(next_id_));
}

std::filesystem::path
CheckpointCoordinator::savepoint_dir(const std::filesystem::path& parent) const {
  return (parent.empty() ? settings_.root : parent) /
         ("savepoint-" + utc_now(kCompactUtc) + "-" + std::to_string(next_id_));
}

void CheckpointCoordinator::prune() const {
  for (const auto& problem : prune_checkpoints(settings_.root, settings_.retain, std::nullopt))
    log_.warn("{}", problem);
}

} // namespace streamctl::runtime
