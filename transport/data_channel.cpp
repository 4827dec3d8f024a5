#include "transport/data_channel.hpp"

#include "transport/secure_endpoint.hpp"

namespace streamctl::transport {

InputGate::InputGate(zmq::context_t& context, const std::string& endpoint,
                     const LinkSecurity& security, RefusalCallback on_refusal)
    : socket_(context, zmq::socket_type::pull) {
  socket_.set(zmq::sockopt::rcvhwm, kQueueBatches);
  socket_.set(zmq::sockopt::linger, 0);
  if (on_refusal && security.encrypt && leaves_host(endpoint))
    monitor_.emplace(context, socket_, std::move(on_refusal));
  bind_endpoint(context, socket_, endpoint, security);
  endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
}

bool InputGate::try_receive(zmq::message_t& message) {
  return socket_.recv(message, zmq::recv_flags::dontwait).has_value();
}

OutputChannel::OutputChannel(zmq::context_t& context, const std::string& endpoint,
                             std::uint32_t channel_id, std::uint16_t input_index,
                             const LinkSecurity& security)
    : socket_(context, zmq::socket_type::push), channel_id_(channel_id), input_index_(input_index) {
  socket_.set(zmq::sockopt::sndhwm, kQueueBatches);
  // Linger lets queued batches (end of input above all) reach the peer after close; the
  // coordinator bounds how long a finishing worker may take.
  socket_.set(zmq::sockopt::linger, 30000);
  // Without this a PUSH to a peer that is not connected yet queues nothing and blocks; with
  // it the pipe exists from connect() on.
  socket_.set(zmq::sockopt::immediate, false);
  connect_endpoint(socket_, endpoint, security);
}

bool OutputChannel::try_send(zmq::message_t& message) {
  return socket_.send(message, zmq::send_flags::dontwait).has_value();
}

} // namespace streamctl::transport
