#pragma once
// A worker's "I am alive" to the coordinator, from a thread of its own (as Flink's
// TaskManager heart-beats apart from its tasks): a task busy for long in one step (firing
// millions of windows at the end of input, serialising a large state) is not taken for dead,
// while a frozen or vanished process still is (SPEC §7).
//
// Threading: constructed and destroyed by the task thread; the beacon thread owns its own
// DEALER socket on the shared context (ZeroMQ contexts are thread-safe, sockets are not).

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include <zmq.hpp>

namespace streamctl::runtime {

class LivenessBeacon {
public:
  // Sends ALIVE with `task` and `attempt` to `endpoint` every `every`.
  LivenessBeacon(zmq::context_t& context, const std::string& endpoint, int task, int attempt,
                 std::chrono::milliseconds every);
  // Stops and joins the thread; its socket is closed before this returns.
  ~LivenessBeacon();
  LivenessBeacon(const LivenessBeacon&) = delete;
  LivenessBeacon& operator=(const LivenessBeacon&) = delete;

private:
  void run(zmq::context_t& context, std::string endpoint, int task, int attempt, std::chrono::milliseconds every);

  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

} // namespace streamctl::runtime
