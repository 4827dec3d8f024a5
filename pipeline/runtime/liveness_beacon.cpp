#include "pipeline/runtime/liveness_beacon.hpp"

#include <cerrno>
#include <cstring>
#include <sys/eventfd.h>
#include <unistd.h>

#include "state/error.hpp"
#include "transport/control.hpp"
#include "transport/secure_endpoint.hpp"

namespace streamctl::runtime {

std::string beacon_identity(int task, int attempt) {
  return "beacon-" + std::to_string(task) + "-" + std::to_string(attempt);
}

LivenessBeacon::LivenessBeacon(zmq::context_t& context, const std::string& endpoint, int task,
                               int attempt, std::chrono::milliseconds every,
                               std::chrono::milliseconds reply_timeout,
                               std::function<void()> on_silence,
                               transport::LinkSecurity security) {
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC);
  if (wake_fd_ < 0)
    throw Error(ErrorKind::Internal,
                std::string("cannot start the liveness beacon: eventfd: ") + std::strerror(errno));
  thread_ = std::thread([this, &context, endpoint, task, attempt, every, reply_timeout,
                         on_silence = std::move(on_silence), security = std::move(security)] {
    run(context, endpoint, task, attempt, every, reply_timeout, on_silence, security);
  });
}

LivenessBeacon::~LivenessBeacon() {
  std::uint64_t one = 1;
  while (::write(wake_fd_, &one, sizeof one) < 0 && errno == EINTR) {
  }
  thread_.join();
  ::close(wake_fd_);
}

void LivenessBeacon::run(zmq::context_t& context, const std::string& endpoint, int task,
                         int attempt, std::chrono::milliseconds every,
                         std::chrono::milliseconds reply_timeout,
                         const std::function<void()>& on_silence,
                         const transport::LinkSecurity& security) {
  using Clock = std::chrono::steady_clock;
  zmq::socket_t socket(context, zmq::socket_type::dealer);
  socket.set(zmq::sockopt::linger, 0);
  socket.set(zmq::sockopt::routing_id, beacon_identity(task, attempt));
  transport::connect_endpoint(socket, endpoint, security);
  std::string message = transport::encode_control(transport::ControlMessage{"ALIVE", {}}
                                                      .set("task", std::to_string(task))
                                                      .set("attempt", std::to_string(attempt)));
  const bool expect_replies = reply_timeout.count() > 0;
  auto last_reply = Clock::now();
  auto next_beat = Clock::now();
  for (;;) {
    auto now = Clock::now();
    if (now >= next_beat) {
      try {
        socket.send(zmq::buffer(message), zmq::send_flags::dontwait);
      } catch (const zmq::error_t&) {
        // A full queue means the coordinator is not reading: it will judge by what it has.
      }
      next_beat = now + every;
    }
    if (expect_replies && now - last_reply >= reply_timeout) {
      on_silence();
      return;
    }
    auto wake_at = expect_replies ? std::min(next_beat, last_reply + reply_timeout) : next_beat;
    auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(wake_at - now) +
                   std::chrono::milliseconds(1);
    zmq::pollitem_t items[] = {{nullptr, wake_fd_, ZMQ_POLLIN, 0},
                               {socket.handle(), 0, ZMQ_POLLIN, 0}};
    try {
      zmq::poll(items, expect_replies ? 2 : 1, timeout);
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) throw;
      continue;
    }
    if (items[0].revents & ZMQ_POLLIN) return;
    zmq::message_t reply;
    while (expect_replies && socket.recv(reply, zmq::recv_flags::dontwait)) {
      auto decoded = transport::decode_control(reply.to_string_view());
      if (decoded && decoded->type == "ALIVE_OK") last_reply = Clock::now();
    }
  }
}

} // namespace streamctl::runtime
