#include "pipeline/runtime/liveness_beacon.hpp"

#include "transport/control.hpp"

namespace streamctl::runtime {

LivenessBeacon::LivenessBeacon(zmq::context_t& context, const std::string& endpoint, int task, int attempt,
                               std::chrono::milliseconds every)
    : thread_([this, &context, endpoint, task, attempt, every] { run(context, endpoint, task, attempt, every); }) {}

LivenessBeacon::~LivenessBeacon() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void LivenessBeacon::run(zmq::context_t& context, std::string endpoint, int task, int attempt,
                         std::chrono::milliseconds every) {
  zmq::socket_t socket(context, zmq::socket_type::dealer);
  socket.set(zmq::sockopt::linger, 0);
  socket.set(zmq::sockopt::routing_id, "beacon-" + std::to_string(task) + "-" + std::to_string(attempt));
  socket.connect(endpoint);
  std::string message = transport::encode_control(transport::ControlMessage{"ALIVE", {}}
                                                      .set("task", std::to_string(task))
                                                      .set("attempt", std::to_string(attempt)));
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    try {
      socket.send(zmq::buffer(message), zmq::send_flags::dontwait);
    } catch (const zmq::error_t&) {
      // A full queue means the coordinator is not reading: it will judge by what it has.
    }
    wake_.wait_for(lock, every, [this] { return stopping_; });
  }
}

} // namespace streamctl::runtime
