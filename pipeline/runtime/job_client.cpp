#include "pipeline/runtime/job_client.hpp"

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
  zmq::pollitem_t items[] = {{socket.handle(), 0, ZMQ_POLLIN, 0}};
  zmq::poll(items, 1, timeout);
  zmq::message_t reply;
  if (!(items[0].revents & ZMQ_POLLIN) || !socket.recv(reply, zmq::recv_flags::dontwait))
    throw Error(ErrorKind::Usage, "job " + job.id + " did not answer within " +
                                      std::to_string(timeout.count()) + " ms (coordinator pid " +
                                      std::to_string(job.coordinator_pid) + ")");
  auto message = transport::decode_control(reply.to_string_view());
  if (!message) throw Error(ErrorKind::Internal, "job " + job.id + " sent a malformed reply");
  return *message;
}

} // namespace streamctl::runtime
