#include "transport/handshake_monitor.hpp"

#include <array>
#include <cstdio>
#include <cstring>
#include <vector>

#include <zmq_addon.hpp>

namespace streamctl::transport {

namespace {

constexpr int kEvents = ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                        ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;

std::string unique_inproc(const char* what, const void* owner) {
  std::array<char, 64> name{};
  std::snprintf(name.data(), name.size(), "inproc://streamctl-%s-%p", what, owner);
  return name.data();
}

std::string protocol_error_reason(std::uint32_t code) {
  switch (code) {
  case ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH:
    return "the peer uses another security mechanism (a client without the job's keys)";
  case ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC:
    return "the peer's CURVE handshake does not decrypt (it does not know the job's server key)";
  default: {
    std::array<char, 64> text{};
    std::snprintf(text.data(), text.size(), "ZMTP protocol error 0x%x", code);
    return text.data();
  }
  }
}

} // namespace

HandshakeMonitor::HandshakeMonitor(zmq::context_t& context, zmq::socket_t& socket,
                                   RefusalCallback on_refusal)
    : socket_(socket), on_refusal_(std::move(on_refusal)), events_(context, zmq::socket_type::pair),
      stop_receiver_(context, zmq::socket_type::pair),
      stop_sender_(context, zmq::socket_type::pair) {
  events_.set(zmq::sockopt::linger, 0);
  stop_receiver_.set(zmq::sockopt::linger, 0);
  stop_sender_.set(zmq::sockopt::linger, 0);
  std::string events_endpoint = unique_inproc("monitor", this);
  if (zmq_socket_monitor(socket_.handle(), events_endpoint.c_str(), kEvents) != 0)
    throw zmq::error_t();
  events_.connect(events_endpoint);
  std::string stop_endpoint = unique_inproc("monitor-stop", this);
  stop_receiver_.bind(stop_endpoint);
  stop_sender_.connect(stop_endpoint);
  thread_ = std::thread([this] { run(); });
}

HandshakeMonitor::~HandshakeMonitor() {
  // The socket writes its events with blocking sends: turn them off before their reader goes.
  zmq_socket_monitor(socket_.handle(), nullptr, 0);
  try {
    stop_sender_.send(zmq::str_buffer("stop"), zmq::send_flags::none);
  } catch (const zmq::error_t&) {
    // The context is shutting down: the thread sees that too and ends.
  }
  thread_.join();
}

void HandshakeMonitor::run() {
  std::array<zmq::pollitem_t, 2> items{
      {{events_.handle(), 0, ZMQ_POLLIN, 0}, {stop_receiver_.handle(), 0, ZMQ_POLLIN, 0}}};
  try {
    while (true) {
      zmq::poll(items.data(), items.size(), std::chrono::milliseconds(-1));
      if (items[0].revents & ZMQ_POLLIN) handle_event();
      if (items[1].revents & ZMQ_POLLIN) return;
    }
  } catch (const zmq::error_t&) {
    // ETERM: the context is being terminated.
  }
}

// An event is two frames: 6 bytes (event id: uint16, value: uint32, host byte order), then
// the endpoint as text.
void HandshakeMonitor::handle_event() {
  std::vector<zmq::message_t> frames;
  if (!zmq::recv_multipart(events_, std::back_inserter(frames), zmq::recv_flags::dontwait) ||
      frames.size() < 2 || frames[0].size() < 6)
    return;
  std::uint16_t event = 0;
  std::uint32_t value = 0;
  std::memcpy(&event, frames[0].data(), sizeof event);
  std::memcpy(&value, frames[0].data<char>() + 2, sizeof value);
  if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
    ++succeeded_;
    return;
  }
  ++failed_;
  if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH || !on_refusal_) return;
  Refusal refusal;
  refusal.endpoint = frames[1].to_string();
  refusal.reason = event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL
                       ? protocol_error_reason(value)
                       : std::string("handshake failed: ") + zmq_strerror(static_cast<int>(value));
  try {
    on_refusal_(refusal);
  } catch (...) {
    // A failing log call must not stop the reports that follow.
  }
}

} // namespace streamctl::transport
