#include "pipeline/runtime/control_channel.hpp"

#include "transport/secure_endpoint.hpp"

namespace streamctl::runtime {

ControlChannel::ControlChannel() : socket_(context_, zmq::socket_type::router) {}

std::string ControlChannel::bind(const std::string& transport,
                                 const std::filesystem::path& socket_dir) {
  socket_.set(zmq::sockopt::linger, 0);
  socket_.set(zmq::sockopt::router_mandatory, true);
  // A restarted worker reuses its task's identity while the dead one's pipe may linger.
  socket_.set(zmq::sockopt::router_handover, true);
  std::string endpoint = transport == "tcp" ? std::string("tcp://127.0.0.1:*")
                                            : "ipc://" + (socket_dir / "control.sock").string();
  socket_.bind(endpoint);
  return socket_.get(zmq::sockopt::last_endpoint);
}

std::string ControlChannel::bind_for_hosts(const std::string& address,
                                           const transport::LinkSecurity& security,
                                           transport::RefusalCallback on_refusal) {
  if (security.encrypt) {
    zap_ = std::make_unique<transport::ZapHandler>(context_, security, on_refusal);
    monitor_ = std::make_unique<transport::HandshakeMonitor>(context_, socket_, std::move(on_refusal));
  }
  transport::bind_endpoint(context_, socket_, "tcp://" + address + ":*", security);
  return socket_.get(zmq::sockopt::last_endpoint);
}

void ControlChannel::send(const std::string& identity, const transport::ControlMessage& message) {
  std::string body = transport::encode_control(message);
  try {
    socket_.send(zmq::buffer(identity), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    socket_.send(zmq::buffer(body), zmq::send_flags::dontwait);
  } catch (const zmq::error_t&) {
    // The peer is gone; see the header.
  }
}

std::optional<ControlChannel::Incoming> ControlChannel::receive() {
  zmq::message_t identity, body;
  if (!socket_.recv(identity, zmq::recv_flags::dontwait)) return std::nullopt;
  if (!socket_.recv(body, zmq::recv_flags::dontwait)) return std::nullopt;
  Incoming in{identity.to_string(), transport::decode_control(body.to_string_view()), {}};
  // ZeroMQ delivers a message's frames together: the rest is here already. Frames past the
  // payload are no part of the protocol and are dropped, so they cannot pose as an identity.
  for (bool more = body.more(), first = true; more; first = false) {
    zmq::message_t extra;
    if (!socket_.recv(extra, zmq::recv_flags::dontwait)) break;
    more = extra.more();
    if (first) in.payload = std::move(extra);
  }
  return in;
}

} // namespace streamctl::runtime
