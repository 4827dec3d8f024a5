#pragma once
// The coordinator's control socket: one ROUTER that every worker's DEALER (identity
// "task-N.A": task N of attempt A) and every one-request client of `streamctl
// status|stop|cancel|savepoint|rescale` (job_client.hpp) connects to, and every snapshot
// upload's DEALER (identity "upload-...", snapshot_upload_protocol.hpp). Messages are
// transport::ControlMessage, one frame each after the ROUTER's identity frame; a snapshot part
// carries its bytes in one more frame.
//
// Not thread-safe: used by the coordinator's thread only (a ZeroMQ socket has one owner).

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include <zmq.hpp>

#include "transport/control.hpp"
#include "transport/curve_keys.hpp"
#include "transport/handshake_monitor.hpp"
#include "transport/zap_handler.hpp"

namespace streamctl::runtime {

class ControlChannel {
public:
  ControlChannel();
  ~ControlChannel() { close(); }
  ControlChannel(const ControlChannel&) = delete;
  ControlChannel& operator=(const ControlChannel&) = delete;

  // Binds tcp://127.0.0.1:* when `transport` is "tcp", else ipc://SOCKET_DIR/control.sock;
  // returns the endpoint that workers and clients connect to.
  std::string bind(const std::string& transport, const std::filesystem::path& socket_dir);
  // A job with hosts: also binds tcp://ADDRESS:* (ADDRESS: this host as the others reach it)
  // for the workers, as a CURVE server admitting only the job's keys when `security` says so
  // (a ZAP handler and a handshake monitor report each refusal to `on_refusal`). Clients of
  // `status` and the like keep the plain ipc endpoint of bind(): they run on this host.
  // Returns the endpoint the workers connect to.
  std::string bind_for_hosts(const std::string& address, const transport::LinkSecurity& security,
                             transport::RefusalCallback on_refusal);

  // Sends without blocking; a peer that is gone (router_mandatory) misses the message: a
  // worker's exit is handled through SIGCHLD, and a client that left needs no answer.
  void send(const std::string& identity, const transport::ControlMessage& message);
  // A worker's identity: unique per attempt, so that a worker a rescale keeps, still connected
  // under its old task's identity, is never taken for the new worker of that task.
  static std::string task_identity(int task, int attempt) {
    return "task-" + std::to_string(task) + "." + std::to_string(attempt);
  }

  struct Incoming {
    std::string identity;
    std::optional<transport::ControlMessage> message; // none: malformed, to be skipped
    zmq::message_t payload; // the frame after the message, if any (a snapshot part's bytes)
  };
  // The next message waiting, without blocking; none when nothing waits.
  std::optional<Incoming> receive();

  // For zmq::poll.
  void* handle() { return socket_.handle(); }
  void close() {
    monitor_.reset(); // before its socket
    // The last answers to clients (a request the job's end refused) are sent, within a bound:
    // workers are gone by now, and a client that left has no pipe to wait on.
    if (socket_.handle() != nullptr) socket_.set(zmq::sockopt::linger, 200);
    socket_.close();
    zap_.reset(); // after every socket that used it, before the context
  }

private:
  zmq::context_t context_;
  zmq::socket_t socket_;
  std::unique_ptr<transport::ZapHandler> zap_;
  std::unique_ptr<transport::HandshakeMonitor> monitor_;
};

} // namespace streamctl::runtime
