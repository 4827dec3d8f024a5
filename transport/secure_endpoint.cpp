#include "transport/secure_endpoint.hpp"

#include "state/error.hpp"

namespace streamctl::transport {

namespace {

bool uses_curve(const std::string& endpoint, const LinkSecurity& security) {
  return security.encrypt && leaves_host(endpoint);
}

} // namespace

bool leaves_host(const std::string& endpoint) {
  return endpoint.rfind("ipc://", 0) != 0 && endpoint.rfind("inproc://", 0) != 0;
}

bool zap_handler_bound(zmq::context_t& context) {
  // Only one socket can bind an inproc name: if ours can, no handler holds it.
  zmq::socket_t probe(context, zmq::socket_type::rep);
  probe.set(zmq::sockopt::linger, 0);
  try {
    probe.bind("inproc://zeromq.zap.01");
  } catch (const zmq::error_t& e) {
    if (e.num() == EADDRINUSE) return true;
    throw;
  }
  // Closing frees the name only later, in the reaper thread; unbinding frees it now.
  probe.unbind("inproc://zeromq.zap.01");
  return false;
}

void bind_endpoint(zmq::context_t& context, zmq::socket_t& socket, const std::string& endpoint,
                   const LinkSecurity& security) {
  if (!uses_curve(endpoint, security)) {
    socket.set(zmq::sockopt::curve_server, 0);
    socket.bind(endpoint);
    return;
  }
  if (!zap_handler_bound(context))
    throw Error(ErrorKind::Internal,
                "refusing to bind " + endpoint +
                    " with CURVE: no ZAP handler runs in this context, so any client that knows "
                    "the server key would be admitted (start a ZapHandler first)");
  socket.set(zmq::sockopt::curve_server, 1);
  socket.set(zmq::sockopt::curve_publickey, security.server.public_key);
  socket.set(zmq::sockopt::curve_secretkey, security.server.secret_key);
  socket.bind(endpoint);
}

void connect_endpoint(zmq::socket_t& socket, const std::string& endpoint,
                      const LinkSecurity& security) {
  if (!uses_curve(endpoint, security)) {
    socket.set(zmq::sockopt::curve_server, 0);
    socket.connect(endpoint);
    return;
  }
  socket.set(zmq::sockopt::curve_serverkey, security.server.public_key);
  socket.set(zmq::sockopt::curve_publickey, security.client.public_key);
  socket.set(zmq::sockopt::curve_secretkey, security.client.secret_key);
  socket.connect(endpoint);
}

} // namespace streamctl::transport
