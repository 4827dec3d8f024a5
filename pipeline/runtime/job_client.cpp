#include "pipeline/runtime/job_client.hpp"

#include <algorithm>
#include <zmq.hpp>

#include "state/error.hpp"

namespace streamctl::runtime {

transport::ControlMessage ask_job(const JobEntry& job, const transport::ControlMessage& request,
                                  std::chrono::milliseconds timeout) {
  if ((job.state != "running" && job.state != "restarting") || job.control.empty())
    throw Error(ErrorKind::Usage, "job " + job.id + " is not running (it is " + job.state +
                                      (job.lost ? ": its coordinator is gone" : "") + ")");
  zmq::context_t context;
  zmq::socket_t socket(context, zmq::socket_type::dealer);
  socket.set(zmq::sockopt::linger, 0);
  socket.connect(job.control);
  std::string body = transport::encode_control(request);
  socket.send(zmq::buffer(body), zmq::send_flags::none);
  // A coordinator answers every request while it lives; one killed, or one that ended just as
  // the request came, never will: waited for in slices, its end is noticed within one, not
  // after the whole timeout (up to half an hour for a rescale).
  constexpr std::chrono::milliseconds kSlice{250};
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  zmq::message_t reply;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    zmq::pollitem_t items[] = {{socket.handle(), 0, ZMQ_POLLIN, 0}};
    zmq::poll(items, 1, std::clamp(left, std::chrono::milliseconds(0), kSlice));
    if ((items[0].revents & ZMQ_POLLIN) && socket.recv(reply, zmq::recv_flags::dontwait)) break;
    bool gone = job.coordinator_pid > 0 && !process_alive(job.coordinator_pid);
    // Its last answer, sent as it ended, may still be on its way.
    if (gone && zmq::poll(items, 1, kSlice) > 0 && socket.recv(reply, zmq::recv_flags::dontwait)) break;
    if (gone)
      throw Error(ErrorKind::Usage, "job " + job.id + " is not running any more: its coordinator (pid " +
                                        std::to_string(job.coordinator_pid) + ") ended before it answered");
    if (left <= kSlice)
      throw Error(ErrorKind::Usage, "job " + job.id + " did not answer within " +
                                        std::to_string(timeout.count()) + " ms (coordinator pid " +
                                        std::to_string(job.coordinator_pid) + ")");
  }
  auto message = transport::decode_control(reply.to_string_view());
  if (!message) throw Error(ErrorKind::Internal, "job " + job.id + " sent a malformed reply");
  return *message;
}

} // namespace streamctl::runtime
