#pragma once
// Shared by the CURVE tests: waiting on a condition with a deadline, receiving with a timeout,
// and collecting refusals reported from another thread.

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "transport/refusal.hpp"

namespace streamctl::testing {

// Polls `condition` until it holds or `timeout` passes; generous, for a loaded machine.
template <typename Condition>
bool eventually(Condition condition, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

inline std::optional<std::string> receive_within(zmq::socket_t& socket,
                                                 std::chrono::milliseconds timeout) {
  std::vector<zmq::pollitem_t> items{{socket.handle(), 0, ZMQ_POLLIN, 0}};
  if (zmq::poll(items, timeout) == 0) return std::nullopt;
  zmq::message_t message;
  if (!socket.recv(message, zmq::recv_flags::dontwait)) return std::nullopt;
  return message.to_string();
}

inline void send_text(zmq::socket_t& socket, const std::string& text) {
  socket.send(zmq::buffer(text), zmq::send_flags::dontwait);
}

class RefusalLog {
public:
  transport::RefusalCallback callback() {
    return [this](const transport::Refusal& refusal) {
      std::lock_guard lock(mutex_);
      refusals_.push_back(refusal);
    };
  }
  std::vector<transport::Refusal> refusals() const {
    std::lock_guard lock(mutex_);
    return refusals_;
  }
  std::size_t size() const { return refusals().size(); }

private:
  mutable std::mutex mutex_;
  std::vector<transport::Refusal> refusals_;
};

} // namespace streamctl::testing
