#pragma once
// The events of a running job and what each means for it: worker messages (readiness,
// heartbeats, checkpoint acknowledgements, failures, fetches of the snapshot to restore from),
// client commands, signals (SIGCHLD: a
// worker exited; SIGINT/SIGTERM: stop, and the second time cancel) and silent workers. It
// routes them to the worker pool, the checkpoint coordinator, the client commands and the
// job's state, and reports a task's failure to the job's state, which restarts or fails it.
//
// Not thread-safe: used by the coordinator's thread only.

#include <chrono>
#include <string>
#include <string_view>

#include <spdlog/logger.h>

#include "pipeline/runtime/checkpoint_coordinator.hpp"
#include "pipeline/runtime/checkpoint_settings.hpp"
#include "pipeline/runtime/client_commands.hpp"
#include "pipeline/runtime/control_channel.hpp"
#include "pipeline/runtime/job_state.hpp"
#include "pipeline/runtime/signal_channel.hpp"
#include "pipeline/runtime/snapshot_receiver.hpp"
#include "pipeline/runtime/snapshot_server.hpp"
#include "pipeline/runtime/tap_relay.hpp"
#include "pipeline/runtime/worker_pool.hpp"

namespace streamctl::runtime {

class Supervisor {
public:
  // Every collaborator must outlive this object. `uploads`: where the workers' snapshot
  // uploads go ([checkpoint] storage = "coordinator" with hosts); none: they are refused.
  // `snapshot_server`: answers the FETCHes of workers that restore from this host's storage.
  Supervisor(const RestartSettings& restart, SignalChannel& signals, ControlChannel& control,
             WorkerPool& workers, JobState& state, CheckpointCoordinator& checkpoints,
             ClientCommands& commands, TapRelay& taps, SnapshotReceiver* uploads,
             SnapshotServer& snapshot_server, spdlog::logger& log)
      : restart_(restart), signals_(signals), control_(control), workers_(workers), state_(state),
        checkpoints_(checkpoints), commands_(commands), taps_(taps), uploads_(uploads),
        snapshot_server_(snapshot_server), log_(log) {}

  // Handles what arrives within `timeout`. False when the running attempt must end
  // (JobState::interrupted).
  bool poll_once(std::chrono::milliseconds timeout);
  // While the sinks publish the job's last output (WorkerPool::release): waits up to `timeout`
  // for a signal or a message; true when the job was cancelled (a second SIGINT or SIGTERM,
  // or `streamctl cancel` served meanwhile). SIGCHLD is left to the pool, which reaps its
  // workers itself, and reads the control channel (serve_while_publishing).
  bool wait_while_publishing(std::chrono::milliseconds timeout);
  // A message that came while the sinks publish: clients and tap readers are answered (a
  // savepoint or rescale is refused: the job is finishing), remote workers' beacons too;
  // workers' reports change nothing any more.
  void serve_while_publishing(const ControlChannel::Incoming& in);
  // A worker silent for [restart] heartbeat_timeout is killed: its task failed.
  void check_heartbeats(Clock::time_point now);
  // A task failed or its worker died: a restart per [restart], or the job fails.
  void task_failed(std::string reason);

private:
  void drain_messages();
  void dispatch(const ControlChannel::Incoming& in);
  bool answer(const ControlChannel::Incoming& in);
  void handle_message(const transport::ControlMessage& m);
  void handle_upload(const ControlChannel::Incoming& in);
  void handle_signal(int sig);
  static int exit_code_of_signal(int sig);
  bool cancel_on_repeated_signal(int sig, std::string_view when);
  bool can_stop_at_checkpoint() const;
  void reap_children();

  const RestartSettings& restart_;
  SignalChannel& signals_;
  ControlChannel& control_;
  WorkerPool& workers_;
  JobState& state_;
  CheckpointCoordinator& checkpoints_;
  ClientCommands& commands_;
  TapRelay& taps_;
  SnapshotReceiver* uploads_;
  SnapshotServer& snapshot_server_;
  spdlog::logger& log_;
  int signals_received_ = 0; // SIGINT and SIGTERM so far
};

} // namespace streamctl::runtime
