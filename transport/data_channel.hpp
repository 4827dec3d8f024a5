#pragma once
// Data-plane sockets. Each worker binds one InputGate (PULL) that all of its upstream channels
// connect to; each upstream subtask holds one OutputChannel (PUSH) per downstream subtask it
// sends to. High-water marks of a few batches on both ends bound the queue of every channel,
// so a slow consumer blocks its producers' sends: that is the backpressure that reaches the
// sources. Sends never block the caller: try_send() reports a full queue and the task loop
// waits on POLLOUT together with its control socket, so a cancel is never stuck behind data.
//
// Security: with a LinkSecurity that encrypts, a tcp:// channel uses CURVE (the gate is the
// server, an output channel the client) and ipc:// stays plain; the default is plain
// everywhere. A CURVE gate needs a ZapHandler running in its context (see secure_endpoint.hpp).
//
// Threading: a socket is used by the one thread that created it.

#include <cstdint>
#include <optional>
#include <string>

#include <zmq.hpp>

#include "transport/curve_keys.hpp"
#include "transport/handshake_monitor.hpp"
#include "transport/refusal.hpp"

namespace streamctl::transport {

// Batches queued per channel end: bounded memory (~ 2 x kQueueBatches x batch bytes).
inline constexpr int kQueueBatches = 4;

class InputGate {
public:
  // `endpoint` like "ipc:///run/dir/t3.sock" or "tcp://127.0.0.1:*" (port chosen by the OS).
  // `on_refusal`, when given for a CURVE gate, hears of peers refused before ZAP is asked (a
  // plain client, a client without the server key); the ZapHandler reports the others.
  InputGate(zmq::context_t& context, const std::string& endpoint,
            const LinkSecurity& security = LinkSecurity::plain(), RefusalCallback on_refusal = {});
  InputGate(const InputGate&) = delete;
  InputGate& operator=(const InputGate&) = delete;
  // The endpoint peers connect to, with the OS-chosen port resolved.
  const std::string& endpoint() const { return endpoint_; }
  zmq::socket_t& socket() { return socket_; }
  // Non-blocking; false when nothing is queued.
  bool try_receive(zmq::message_t& message);

private:
  zmq::socket_t socket_;
  // Declared after socket_: destroyed first, while the socket it watches is open.
  std::optional<HandshakeMonitor> monitor_;
  std::string endpoint_;
};

class OutputChannel {
public:
  OutputChannel(zmq::context_t& context, const std::string& endpoint, std::uint32_t channel_id,
                std::uint16_t input_index, const LinkSecurity& security = LinkSecurity::plain());
  zmq::socket_t& socket() { return socket_; }
  std::uint32_t channel_id() const { return channel_id_; }
  std::uint16_t input_index() const { return input_index_; }
  std::uint64_t next_sequence() { return sequence_++; }
  // Non-blocking; false when the channel's queue is full (the message is left untouched).
  bool try_send(zmq::message_t& message);
  // What is still queued is not wanted: closing drops it at once rather than lingering.
  void drop_unsent() { socket_.set(zmq::sockopt::linger, 0); }

private:
  zmq::socket_t socket_;
  std::uint32_t channel_id_;
  std::uint16_t input_index_;
  std::uint64_t sequence_ = 0;
};

} // namespace streamctl::transport
