#include "pipeline/runtime/supervisor.hpp"

#include <algorithm>
#include <csignal>
#include <cstring>
#include <sys/wait.h>

#include "pipeline/runtime/job_metrics.hpp"
#include "pipeline/runtime/snapshot_upload_protocol.hpp"

namespace streamctl::runtime {

using namespace std::chrono_literals;

bool Supervisor::poll_once(std::chrono::milliseconds timeout) {
  zmq::pollitem_t items[] = {{control_.handle(), 0, ZMQ_POLLIN, 0},
                             {nullptr, signals_.fd(), ZMQ_POLLIN, 0}};
  zmq::poll(items, 2, std::max(timeout, 0ms));
  if (items[0].revents & ZMQ_POLLIN)
    while (auto in = control_.receive()) {
      dispatch(*in);
      if (state_.interrupted()) return false;
    }
  if (items[1].revents & ZMQ_POLLIN)
    while (int sig = signals_.next()) {
      handle_signal(sig);
      if (state_.interrupted()) return false;
    }
  return !state_.interrupted();
}

// A first signal lets the sinks finish publishing (the job's input is all read; the exit code
// says that a signal came), a second cancels, as at any other moment of the job (SPEC §2):
// without this, a sink writing into a reader that stalls kept the coordinator deaf to both.
bool Supervisor::wait_while_publishing(std::chrono::milliseconds timeout) {
  if (state_.ended()) return true;
  zmq::pollitem_t items[] = {{control_.handle(), 0, ZMQ_POLLIN, 0},
                             {nullptr, signals_.fd(), ZMQ_POLLIN, 0}};
  zmq::poll(items, 2, std::max(timeout, 0ms));
  while (int sig = signals_.next()) {
    if (sig == SIGCHLD) continue;
    if (cancel_on_repeated_signal(sig, " while its sinks publish its last output, which may be incomplete"))
      return true;
    state_.outcome().exit_code = exit_code_of_signal(sig);
    log_.warn("{} received: the sinks are publishing the job's last output (send it again to cancel)",
              ::strsignal(sig));
  }
  return false;
}

void Supervisor::serve_while_publishing(const ControlChannel::Incoming& in) {
  if (in.message) answer(in);
}

// What waits on the control socket, until the running attempt must end.
void Supervisor::drain_messages() {
  while (!state_.interrupted()) {
    auto in = control_.receive();
    if (!in) break;
    dispatch(*in);
  }
}

// What is answered at any moment of the job, its end too: a remote worker's beacon (without an
// answer for its heartbeat timeout, a cut link giving no EOF, the worker ends itself:
// liveness_beacon.hpp), clients and tap readers. True when `in` was a client's or a reader's.
bool Supervisor::answer(const ControlChannel::Incoming& in) {
  const transport::ControlMessage& m = *in.message;
  if (m.type == "ALIVE") control_.send(in.identity, transport::ControlMessage{"ALIVE_OK", {}});
  if (ClientCommands::is_client_command(m)) {
    commands_.handle(in.identity, m);
    return true;
  }
  if (TapRelay::is_client_message(m)) {
    taps_.on_client(in.identity, m);
    return true;
  }
  return false;
}

void Supervisor::dispatch(const ControlChannel::Incoming& in) {
  if (!in.message) return;
  // A worker restoring from the coordinator's storage (snapshot_server.hpp): its FETCH comes
  // from a link of its own, "restore-task-N-aATTEMPT", and is answered there.
  if (SnapshotServer::is_fetch(*in.message)) {
    control_.send(in.identity, snapshot_server_.answer(in.identity, *in.message));
    return;
  }
  if (answer(in)) return;
  if (is_snapshot_upload(in.message->type))
    handle_upload(in);
  else
    handle_message(*in.message);
}

// A part or the end of a snapshot file a worker sends: accepted only for the checkpoint being
// taken now, from the running attempt (snapshot_receiver.hpp).
void Supervisor::handle_upload(const ControlChannel::Incoming& in) {
  if (!uploads_) {
    control_.send(in.identity, transport::ControlMessage{"SNAPSHOT_ERROR", {}}.set(
                                   "message", "this job's workers write their snapshots themselves"));
    return;
  }
  std::optional<SnapshotReceiver::Accepting> accepting;
  if (auto pending = checkpoints_.in_flight())
    accepting = SnapshotReceiver::Accepting{workers_.attempt(), pending->id, pending->dir};
  std::string_view payload(static_cast<const char*>(in.payload.data()), in.payload.size());
  control_.send(in.identity, uploads_->handle(in.identity, *in.message, payload, accepting));
}

// A message of a worker of the running attempt (older attempts' are dropped).
void Supervisor::handle_message(const transport::ControlMessage& m) {
  auto index = workers_.sender_of(m);
  if (!index) return;
  TaskRuntime& t = workers_[*index];
  t.last_seen = Clock::now();
  if (m.type == "READY") {
    t.worker_pid = static_cast<int>(m.get_int("pid", 0));
    t.ready = true;
    t.endpoint = m.get("endpoint");
    t.kept_groups = static_cast<unsigned>(m.get_int("kept_groups", 0));
  } else if (m.type == "HEARTBEAT") {
    t.record_report(t.last_seen, decode_metrics(m.get("metrics")), TaskLoad::read_from(m));
    t.latency = decode_latency(m.get("latency"));
    if (m.fields.count("unseen_fields")) t.field_presence = decode_field_presence(m.get("unseen_fields"));
  } else if (m.type == "FINISHED") {
    t.finished = true;
    t.record_report(t.last_seen, decode_metrics(m.get("metrics")), TaskLoad::read_from(m));
    t.field_presence = decode_field_presence(m.get("unseen_fields"));
    t.latency = decode_latency(m.get("latency"));
    // A finished task takes no more checkpoints; the end of the job commits everything.
    checkpoints_.abort_pending(t.label + " finished its input first", false);
  } else if (m.type == "TAPPED") {
    taps_.on_tapped(m);
  } else if (m.type == "ACK") {
    checkpoints_.on_ack(*index, m);
  } else if (m.type == "DECLINE") {
    checkpoints_.on_decline(t, m);
  } else if (m.type == "EXHAUSTED") {
    checkpoints_.on_source_exhausted();
  } else if (m.type == "FAILED") {
    if (state_.worker_failed(m)) checkpoints_.abort_pending("a task failed", false);
  }
}

void Supervisor::handle_signal(int sig) {
  if (sig == SIGCHLD) {
    reap_children();
    return;
  }
  if (cancel_on_repeated_signal(sig, "")) return;
  state_.outcome().exit_code = exit_code_of_signal(sig);
  if (can_stop_at_checkpoint()) {
    // SPEC §2: sinks commit what the last completed checkpoint covers. Draining instead
    // would publish output that no checkpoint covers, and a later --resume from the last
    // checkpoint would publish it again.
    log_.warn("{} received: taking a last checkpoint, then stopping (send it again to cancel)",
              ::strsignal(sig));
    checkpoints_.abort_pending("the job is stopping", false);
    // at_end: if it fails, drain.
    if (!checkpoints_.trigger(
            {.dir = checkpoints_.next_checkpoint_dir(), .stop_after = true, .at_end = true}))
      state_.request_stop();
    return;
  }
  log_.warn("{} received: stopping the job gracefully (send it again to cancel)", ::strsignal(sig));
  state_.request_stop();
}

int Supervisor::exit_code_of_signal(int sig) { return sig == SIGINT ? 130 : 143; }

// Counts SIGINT and SIGTERM: the second cancels the job (SPEC §2), `when` saying what it
// interrupts. True when it did.
bool Supervisor::cancel_on_repeated_signal(int sig, std::string_view when) {
  if (++signals_received_ <= 1) return false;
  log_.warn("{} received again: cancelling the job{}", ::strsignal(sig), when);
  state_.cancel_on_signal(exit_code_of_signal(sig));
  return true;
}

// A job that takes checkpoints, with every task running, stops at a last checkpoint.
bool Supervisor::can_stop_at_checkpoint() const {
  return checkpoints_.enabled() && !state_.stopping() && !state_.interrupted() &&
         !checkpoints_.savepoint_in_progress() && !workers_.empty() && workers_.all_running() &&
         checkpoints_.exhausted_sources() == 0;
}

void Supervisor::reap_children() {
  while (auto child = workers_.reap_next()) {
    TaskRuntime* t = child->task;
    if (!t) continue;
    int status = t->process->status();
    bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if ((t->finished && clean) || state_.ended()) continue;
    // A FAILED message, if the worker managed to send one, is the better reason.
    drain_messages();
    if (!state_.ended() && !(t->finished && clean))
      task_failed("worker for " + t->label + " (pid " + std::to_string(child->pid) + ") " +
                  t->process->describe_exit());
  }
}

void Supervisor::check_heartbeats(Clock::time_point now) {
  if (auto silent = workers_.kill_silent_worker(now, restart_.heartbeat_timeout))
    task_failed(*silent);
}

void Supervisor::task_failed(std::string reason) {
  if (state_.task_failed(std::move(reason))) checkpoints_.abort_pending("a task failed", false);
}

} // namespace streamctl::runtime
