#pragma once
// Reports the security handshakes a server socket refuses before ZAP is asked: a peer that
// speaks another mechanism (a plain ZeroMQ client at a CURVE endpoint) or a CURVE client that
// does not know the job's server key (its HELLO does not decrypt). It reads the socket's
// zmq_socket_monitor events on a thread of its own. Refusals by the ZapHandler (a client with
// another key) are counted here but reported by the handler, which knows the peer and the key.
//
// libzmq 4.3's stable monitor events carry the local endpoint, not the peer's address (that is
// in the draft v2 events only), so a Refusal from here has `endpoint` and no `peer`.
//
// Lifetime: construct it on the socket's thread before the socket binds, so no handshake is
// missed; destroy it on that thread while the socket is still open (a member declared after
// the socket does both): the destructor turns the socket's monitoring off, then joins.

#include <atomic>
#include <cstdint>
#include <thread>

#include <zmq.hpp>

#include "transport/refusal.hpp"

namespace streamctl::transport {

class HandshakeMonitor {
public:
  HandshakeMonitor(zmq::context_t& context, zmq::socket_t& socket, RefusalCallback on_refusal);
  ~HandshakeMonitor();
  HandshakeMonitor(const HandshakeMonitor&) = delete;
  HandshakeMonitor& operator=(const HandshakeMonitor&) = delete;

  // Thread-safe.
  std::uint64_t succeeded() const { return succeeded_.load(); }
  std::uint64_t failed() const { return failed_.load(); } // every failure, ZAP's included

private:
  void run();
  void handle_event();

  zmq::socket_t& socket_;
  RefusalCallback on_refusal_;
  std::atomic<std::uint64_t> succeeded_{0};
  std::atomic<std::uint64_t> failed_{0};
  zmq::socket_t events_;        // PAIR connected to the socket's monitor, used by the thread only
  zmq::socket_t stop_receiver_; // used by the thread only
  zmq::socket_t stop_sender_;   // used by the owner's thread
  std::thread thread_;
};

} // namespace streamctl::transport
