#include "pipeline/runtime/job_state.hpp"

#include <ctime>
#include <utility>

#include "pipeline/runtime/utc_clock.hpp"
#include "state/error.hpp"

namespace streamctl::runtime {

namespace {
// Operators' errors name their node first ("node 'm': bad record: ..."): the node of a
// failure, when its message says.
std::string failed_node(const std::string& message) {
  constexpr std::string_view prefix = "node '";
  if (message.rfind(prefix, 0) != 0) return {};
  auto end = message.find('\'', prefix.size());
  return end == std::string::npos ? std::string() : message.substr(prefix.size(), end - prefix.size());
}
} // namespace

bool JobState::task_failed(std::string reason) {
  if (ended_ || restart_pending_) return false;
  bool strategy = restart_.strategy != "none";
  if (strategy && !stopping_ && restarts_ < restart_.max_attempts) {
    last_failure_ = std::move(reason);
    restart_pending_ = true;
    return true;
  }
  if (strategy && restarts_ >= restart_.max_attempts)
    reason +=
        " (after " + std::to_string(restarts_) + " restart(s): [restart] max_attempts reached)";
  fail(reason);
  return false;
}

bool JobState::worker_failed(const transport::ControlMessage& m) {
  std::string where = m.get("message") + " (in " + m.get("chain") + ")";
  failure_ = FailureCause{failed_node(m.get("message")), m.get("chain"), m.get("message"), utc_now()};
  if (m.get("kind") == "output_closed") {
    // Like `yes | head`: the reader has what it wanted; end quietly, as SIGPIPE would.
    // Recorded as stopped, not failed (streamctl-run(1)): nothing went wrong.
    log_.info("the reader of stdout has gone: stopping the job");
    outcome_.exit_code = exit_code_for(ErrorKind::OutputClosed);
    fail("");
    failure_.reset();
    final_state_ = "stopped";
  } else if (m.get("kind") == "snapshot") {
    outcome_.exit_code = exit_code_for(ErrorKind::Snapshot);
    fail(where);
  } else if (m.get("kind") == "usage") {
    // A pipeline error (a dead-letter file that cannot be opened): every restart would meet
    // it again, so it is never retried.
    outcome_.exit_code = exit_code_for(ErrorKind::Usage);
    fail(where);
  } else {
    return task_failed(where);
  }
  return false;
}

void JobState::fail(const std::string& reason) {
  if (ended_) return;
  refuse_rescale_client("the job failed: " + reason);
  outcome_.error = reason;
  if (!failure_ && !reason.empty()) failure_ = FailureCause{{}, {}, reason, utc_now()};
  if (outcome_.exit_code == 0) outcome_.exit_code = 1;
  final_state_ = "failed";
  workers_.cancel_all();
  ended_ = true;
}

void JobState::refuse_rescale_client(const std::string& message) {
  if (rescale_client_.empty()) return;
  control_.send(rescale_client_, transport::ControlMessage{"ERROR", {}}.set("message", message));
  rescale_client_.clear();
}

void JobState::request_stop() {
  if (stopping_) return;
  stopping_ = true;
  workers_.send_all(transport::ControlMessage{"STOP", {}});
}

void JobState::cancel_on_signal(int exit_code) {
  outcome_.exit_code = exit_code;
  workers_.cancel_all();
  final_state_ = "cancelled";
  ended_ = true;
}

void JobState::cancel(const std::string& reason) {
  outcome_.exit_code = 1;
  outcome_.error = reason;
  workers_.cancel_all();
  final_state_ = "cancelled";
  ended_ = true;
}

int JobState::begin_restart() {
  restart_pending_ = false;
  failure_.reset();
  return ++restarts_;
}

bool JobState::restart_may_go_on() {
  if (stopping_ && !ended_) {
    final_state_ = "stopped";
    ended_ = true;
  }
  return !ended_;
}

LoadedJob JobState::take_rescaled() {
  LoadedJob next = std::move(*rescale_to_);
  rescale_to_.reset();
  return next;
}

void JobState::attempt_flowing(const std::filesystem::path& snapshot,
                               const std::string& parallelism) {
  if (!std::exchange(rescaled_, false)) return;
  auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - rescale_halted_).count();
  log_.info(
      "rescaled in {} ms (from the snapshot that stopped the sources to records flowing again)",
      ms);
  if (rescale_client_.empty()) return; // the autoscaler's
  control_.send(rescale_client_, transport::ControlMessage{"OK", {}}
                                     .set("path", snapshot.string())
                                     .set("parallelism", parallelism)
                                     .set("downtime_ms", std::to_string(ms)));
  rescale_client_.clear();
}

void JobState::record_end() {
  if (final_state_.empty()) final_state_ = stopping_ ? "stopped" : "finished";
  // Cancelled between the rescale's snapshot and its start.
  refuse_rescale_client("the job ended (" + final_state_ + ") before it ran at the new parallelism");
  registration_.update(final_state_, workers_.pids());
  registration_.remove_sockets();
}

void JobState::checkpoint_completed(const std::filesystem::path& dir) {
  registration_.set_last_checkpoint(dir.string());
  record("running");
}

void JobState::rescale_ready(LoadedJob next, const std::string& client, Clock::time_point halted) {
  rescale_halted_ = halted;
  rescaled_ = true;
  rescale_to_ = std::move(next);
  rescale_client_ = client;
}

void JobState::stopped_at(const std::filesystem::path& snapshot) {
  outcome_.savepoint = snapshot;
  final_state_ = "stopped";
  ended_ = true;
  bool savepoint = snapshot.filename().string().rfind("savepoint-", 0) == 0;
  log_.info("job {} stopped with {} {}", outcome_.job_id, savepoint ? "savepoint" : "checkpoint",
            snapshot.string());
}

std::string JobState::state() const {
  return restart_pending_ || restarting_ ? "restarting" : stopping_ ? "stopping" : "running";
}

} // namespace streamctl::runtime
