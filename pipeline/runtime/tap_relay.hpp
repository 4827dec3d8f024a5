#pragma once
// The coordinator's part of `streamctl tap` (tap_protocol.hpp): keeps the open taps and their
// clients, tells the workers whose chains hold the tapped node, and passes the workers'
// copies on to the client.
//
// Not thread-safe: used by the coordinator's thread only.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/runtime/control_channel.hpp"
#include "pipeline/runtime/job_loader.hpp"
#include "pipeline/runtime/worker_pool.hpp"

namespace streamctl::runtime {

class TapRelay {
public:
  using Clock = std::chrono::steady_clock;

  // Every collaborator must outlive this object (`job` may be reassigned by a rescale).
  TapRelay(const LoadedJob& job, WorkerPool& workers, ControlChannel& control)
      : job_(job), workers_(workers), control_(control) {}

  // TAP and UNTAP, from a client.
  static bool is_client_message(const transport::ControlMessage& m) {
    return m.type == "TAP" || m.type == "UNTAP";
  }
  void on_client(const std::string& identity, const transport::ControlMessage& m);
  // TAPPED, from a worker of the running attempt.
  void on_tapped(const transport::ControlMessage& m);
  // The job has ended: every client is told (TAP_END) and forgotten.
  void end_all(const std::string& message);

private:
  struct Tap {
    std::string id;
    std::string client; // its ROUTER identity
    std::string node;
    Clock::time_point lease_until;
  };

  void expire(Clock::time_point now);
  // TAP (or UNTAP) to every running worker whose chain holds `node`; returns how many.
  int tell_workers(const transport::ControlMessage& m, const std::string& node);

  const LoadedJob& job_;
  WorkerPool& workers_;
  ControlChannel& control_;
  std::vector<Tap> taps_;
};

} // namespace streamctl::runtime
