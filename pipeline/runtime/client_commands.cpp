#include "pipeline/runtime/client_commands.hpp"

#include "pipeline/runtime/job_status.hpp"
#include "pipeline/runtime/rescale_plan.hpp"

namespace streamctl::runtime {

bool ClientCommands::is_client_command(const transport::ControlMessage& m) {
  return m.type == "STATUS" || m.type == "STOP_JOB" || m.type == "CANCEL_JOB" ||
         m.type == "SAVEPOINT" || m.type == "RESCALE";
}

void ClientCommands::handle(const std::string& identity, const transport::ControlMessage& m) {
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
    const auto& latest = checkpoints_.latest_completed();
    answer.set("state", job_control_.state())
        .set("operators", status_json(job_, metrics_ ? metrics_() : JobMetrics{}))
        .set("checkpoints_completed", std::to_string(checkpoints_.completed_count()))
        .set("checkpoints_failed", std::to_string(checkpoints_.failed_count()))
        .set("last_checkpoint", latest ? latest->string() : "")
        .set("restarts", std::to_string(job_control_.restarts()));
    if (autoscale_)
      if (auto last = autoscale_(); !last.empty()) answer.set("autoscale", last);
    if (warnings_) {
      std::string lines;
      for (const auto& line : warnings_()) lines += line + "\n";
      if (!lines.empty()) answer.set("warnings", lines);
    }
  } else if (m.type == "STOP_JOB" && finishing()) {
    // It drains already: a stop now would only record it as stopped rather than finished.
    log_.info("stop requested by streamctl stop --drain: the job has read all its input and is finishing");
  } else if (m.type == "STOP_JOB") {
    log_.warn("stop requested by streamctl stop --drain: stopping the job gracefully");
    job_control_.drain();
  }
  control_.send(identity, answer);
  if (m.type == "CANCEL_JOB") {
    log_.warn("cancelled by streamctl cancel");
    job_control_.cancel("the job was cancelled (streamctl cancel)");
  }
}

Result<LoadedJob> ClientCommands::plan_checked(const std::string& changes) const {
  auto next = plan_rescale(job_, changes, limits_);
  if (next && placement_check_)
    if (auto why = placement_check_(*next)) next = Failure{*why};
  return next;
}

void ClientCommands::request_rescale(const std::string& client, const std::string& changes) {
  auto next = plan_checked(changes);
  if (!next) {
    // A request that can never work (exit 2), as against a job not ready for one (exit 1).
    control_.send(
        client,
        transport::ControlMessage{"ERROR", {}}.set("message", next.error()).set("usage", "1"));
    return;
  }
  if (auto busy = why_no_savepoint_now()) {
    control_.send(client, transport::ControlMessage{"ERROR", {}}.set("message", *busy));
    return;
  }
  start_rescale(client, std::move(*next));
}

std::optional<std::string> ClientCommands::rescale(const std::string& changes) {
  auto next = plan_checked(changes);
  if (!next) return next.error();
  if (auto busy = why_no_savepoint_now()) return busy;
  start_rescale({}, std::move(*next));
  return std::nullopt;
}

void ClientCommands::start_rescale(const std::string& client, LoadedJob next) {
  checkpoints_.abort_pending("a rescale was requested", false);
  // With periodic checkpoints the rescale's snapshot is one of them (incremental, as they are):
  // it writes what changed since the last checkpoint where a savepoint writes all the state,
  // and its time is downtime. Without, nothing to build on: a savepoint.
  bool checkpoint = checkpoints_.enabled();
  log_.warn("rescale requested{}: taking a {}, then restarting with the new parallelism",
            client.empty() ? " by the autoscaler" : "", checkpoint ? "checkpoint" : "savepoint");
  checkpoints_.trigger({.dir = checkpoint ? checkpoints_.next_checkpoint_dir() : checkpoints_.savepoint_dir(),
                        .savepoint = !checkpoint,
                        .stop_after = true,
                        .client = client,
                        .rescaled = std::move(next)});
}

// `streamctl savepoint JOB [--dir]`, and `stop JOB` (a savepoint, then the job halts).
void ClientCommands::request_savepoint(const std::string& client, const std::string& dir,
                                       bool stop_after) {
  if (auto busy = why_no_savepoint_now()) {
    control_.send(client, transport::ControlMessage{"ERROR", {}}.set("message", *busy));
    return;
  }
  checkpoints_.abort_pending("a savepoint was requested", false);
  if (stop_after) log_.warn("stop requested by streamctl stop: taking a savepoint, then stopping");
  checkpoints_.trigger({.dir = checkpoints_.savepoint_dir(dir),
                        .savepoint = true,
                        .stop_after = stop_after,
                        .client = client});
}

// Every task has read its input: what is left is the final checkpoint and the publishing.
bool ClientCommands::finishing() const { return !workers_.empty() && workers_.all_finished(); }

std::optional<std::string> ClientCommands::why_no_savepoint_now() const {
  if (job_control_.stopping_or_restarting() || workers_.empty())
    return "the job is stopping or restarting; try again";
  if (finishing()) return "the job has read all its input and is finishing";
  if (!workers_.all_running()) return "the job is starting or finishing; try again";
  if (checkpoints_.savepoint_in_progress()) return "a savepoint, rescale or stop is already in progress";
  return std::nullopt;
}

} // namespace streamctl::runtime
