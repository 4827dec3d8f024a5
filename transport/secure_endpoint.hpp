#pragma once
// Binding and connecting with the security a link needs: CURVE for an endpoint that can leave
// the host (tcp://) when the job encrypts, the NULL mechanism (plain) for ipc:// and inproc://.
//
// ZeroMQ copies a socket's security options into each listener or connection when bind() or
// connect() is called, so one socket may hold a CURVE tcp endpoint and a plain ipc endpoint at
// once (tests/unit/transport/secure_endpoint_test.cpp shows it); these helpers set the options
// right before each bind/connect, so the order of calls does not matter. Setting
// ZMQ_CURVE_SERVER to 0 returns a socket, server or client, to the NULL mechanism.
//
// A CURVE server admits any client that knows its public key unless a ZAP handler runs in its
// context (libzmq 4.3 cannot enforce one without draft options), so bind_endpoint refuses to
// bind a CURVE endpoint when no ZapHandler is bound in the context.
//
// Threading: call from the thread that owns the socket.

#include <string>

#include <zmq.hpp>

#include "transport/curve_keys.hpp"

namespace streamctl::transport {

// False for ipc:// and inproc:// endpoints, which never leave the host; true otherwise.
bool leaves_host(const std::string& endpoint);

// Whether a ZAP handler is bound at inproc://zeromq.zap.01 in `context`.
bool zap_handler_bound(zmq::context_t& context);

// Binds `endpoint`: as a CURVE server with the job's server key pair when `security.encrypt`
// and leaves_host(endpoint), else plain. Throws Error(Internal) for a CURVE endpoint when no
// ZAP handler is bound in `context`; zmq::error_t when the bind itself fails.
void bind_endpoint(zmq::context_t& context, zmq::socket_t& socket, const std::string& endpoint,
                   const LinkSecurity& security);

// Connects to `endpoint`: as a CURVE client with the job's client key pair, expecting the job's
// server key, when `security.encrypt` and leaves_host(endpoint), else plain.
void connect_endpoint(zmq::socket_t& socket, const std::string& endpoint,
                      const LinkSecurity& security);

} // namespace streamctl::transport
