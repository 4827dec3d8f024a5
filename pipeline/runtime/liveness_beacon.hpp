#pragma once
// A worker's "I am alive" to the coordinator, from a thread of its own (as Flink's
// TaskManager heart-beats apart from its tasks): a task busy for long in one step (firing
// millions of windows at the end of input, serialising a large state) is not taken for dead,
// while a frozen or vanished process still is (SPEC §7).
//
// It also tells the worker that the coordinator is gone when no EOF says so: a network
// partition between hosts leaves both ends' connections open and silent. When the worker was
// given a heartbeat timeout (worker_bootstrap.hpp), the coordinator answers each ALIVE with
// ALIVE_OK to this beacon's identity, and the beacon calls `on_silence` once when no answer
// came for that long. Without a timeout it expects no answer (and reads none).
//
// Threading: constructed and destroyed by the task thread; the beacon thread owns its own
// DEALER socket on the shared context (ZeroMQ contexts are thread-safe, sockets are not), and
// calls `on_silence` from that thread.

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include <zmq.hpp>

#include "transport/curve_keys.hpp"

namespace streamctl::runtime {

// The routing identity of a task's beacon on the coordinator's ROUTER, where ALIVE_OK goes.
std::string beacon_identity(int task, int attempt);

class LivenessBeacon {
public:
  // Sends ALIVE with `task` and `attempt` to `endpoint` every `every`. With `reply_timeout` >
  // 0, calls `on_silence` when the coordinator has answered none for that long (counted from
  // construction); the beacon then stops.
  LivenessBeacon(zmq::context_t& context, const std::string& endpoint, int task, int attempt,
                 std::chrono::milliseconds every, std::chrono::milliseconds reply_timeout = {},
                 std::function<void()> on_silence = {},
                 transport::LinkSecurity security = transport::LinkSecurity::plain());
  // Stops and joins the thread; its socket is closed before this returns.
  ~LivenessBeacon();
  LivenessBeacon(const LivenessBeacon&) = delete;
  LivenessBeacon& operator=(const LivenessBeacon&) = delete;

private:
  void run(zmq::context_t& context, const std::string& endpoint, int task, int attempt,
           std::chrono::milliseconds every, std::chrono::milliseconds reply_timeout,
           const std::function<void()>& on_silence, const transport::LinkSecurity& security);

  int wake_fd_ = -1; // an eventfd: the destructor's "stop", polled with the socket
  std::thread thread_;
};

} // namespace streamctl::runtime
