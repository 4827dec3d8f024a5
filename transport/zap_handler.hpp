#pragma once
// The ZAP handler (ZeroMQ RFC 27) of one process: it decides which CURVE clients the process's
// server sockets admit. Without it, a CURVE server admits any client that knows its public key.
//
// It admits CURVE clients whose public key is in the allowed set (the job's client key) and
// refuses the others with status 400, reporting each refusal through the callback and the
// counter. NULL clients are admitted: libzmq asks ZAP about them only on a socket with a
// ZAP domain, which plain ipc endpoints do not set. Other mechanisms are refused.
//
// A client that does not know the job's server key, or speaks no CURVE at all, fails before
// ZAP is asked; HandshakeMonitor reports those.
//
// Lifetime: construct it before any CURVE server socket of `context` binds (the constructor
// returns once the handler is bound, and bind_endpoint checks that it is), and destroy it after
// those sockets are closed and before the context is: a handshake that finds no handler is
// admitted. The destructor stops and joins the thread.

#include <atomic>
#include <cstdint>
#include <set>
#include <string>
#include <thread>

#include <zmq.hpp>

#include "transport/curve_keys.hpp"
#include "transport/refusal.hpp"

namespace streamctl::transport {

class ZapHandler {
public:
  // `allowed_client_keys`: Z85 public keys. Throws Error(Internal) when another handler is
  // already bound in `context`.
  ZapHandler(zmq::context_t& context, std::set<std::string> allowed_client_keys,
             RefusalCallback on_refusal);
  // Admits the job's client key only.
  ZapHandler(zmq::context_t& context, const LinkSecurity& security, RefusalCallback on_refusal);
  ~ZapHandler();
  ZapHandler(const ZapHandler&) = delete;
  ZapHandler& operator=(const ZapHandler&) = delete;

  // Thread-safe.
  std::uint64_t admitted() const { return admitted_.load(); }
  std::uint64_t refused() const { return refused_.load(); }

private:
  void run();
  void answer_one();

  std::set<std::string> allowed_;
  RefusalCallback on_refusal_;
  std::atomic<std::uint64_t> admitted_{0};
  std::atomic<std::uint64_t> refused_{0};
  zmq::socket_t requests_;      // REP at inproc://zeromq.zap.01, used by the thread only
  zmq::socket_t stop_receiver_; // PAIR, used by the thread only
  zmq::socket_t stop_sender_;   // PAIR, used by the owner's thread (the destructor)
  std::thread thread_;
};

} // namespace streamctl::transport
