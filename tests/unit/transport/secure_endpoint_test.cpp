#include <catch2/catch.hpp>

#include "transport/handshake_monitor.hpp"
#include "transport/secure_endpoint.hpp"
#include "transport/zap_handler.hpp"
#include "unit/temp_dir.hpp"
#include "unit/transport/security_fixture.hpp"

using namespace streamctl::transport;
using streamctl::testing::eventually;
using streamctl::testing::receive_within;
using streamctl::testing::RefusalLog;
using streamctl::testing::send_text;
using namespace std::chrono_literals;

namespace {

zmq::socket_t make_socket(zmq::context_t& context, zmq::socket_type type) {
  zmq::socket_t socket(context, type);
  socket.set(zmq::sockopt::linger, 0); // a refused client's queue must not hold up the context
  return socket;
}

// A job's server: one PULL socket with a CURVE tcp endpoint, a ZAP handler and a monitor.
// Members are destroyed in reverse: monitor, socket, handler, context.
struct CurveServer {
  zmq::context_t context;
  LinkSecurity job = LinkSecurity::generate();
  RefusalLog zap_log;
  RefusalLog monitor_log;
  ZapHandler zap{context, job, zap_log.callback()};
  zmq::socket_t socket = make_socket(context, zmq::socket_type::pull);
  HandshakeMonitor monitor{context, socket, monitor_log.callback()};
  std::string tcp;

  CurveServer() {
    bind_endpoint(context, socket, "tcp://127.0.0.1:*", job);
    tcp = socket.get(zmq::sockopt::last_endpoint);
  }
  zmq::socket_t client(const LinkSecurity& security, const std::string& endpoint) {
    zmq::socket_t push = make_socket(context, zmq::socket_type::push);
    connect_endpoint(push, endpoint, security);
    return push;
  }
  // A message from a client with the job's keys arrives, and nothing else is in the queue:
  // what a refused client sent never got through.
  void check_only_job_clients_got_through() {
    zmq::socket_t good = client(job, tcp);
    send_text(good, "from the job");
    CHECK(receive_within(socket, 20s) == "from the job");
    CHECK(receive_within(socket, 300ms) == std::nullopt);
  }
};

} // namespace

TEST_CASE("a CURVE client with the job's keys delivers", "[transport][curve]") {
  CurveServer server;
  CHECK(server.socket.get(zmq::sockopt::mechanism) == ZMQ_CURVE);
  zmq::socket_t client = server.client(server.job, server.tcp);
  CHECK(client.get(zmq::sockopt::mechanism) == ZMQ_CURVE);
  for (int i = 0; i < 3; ++i)
    send_text(client, "batch " + std::to_string(i));
  for (int i = 0; i < 3; ++i)
    CHECK(receive_within(server.socket, 20s) == "batch " + std::to_string(i));
  CHECK(server.zap.admitted() == 1);
  CHECK(server.zap.refused() == 0);
  CHECK(eventually([&] { return server.monitor.succeeded() == 1; }));
  CHECK(server.monitor_log.size() == 0);
}

TEST_CASE("a CURVE client with another key pair gets nothing through and is reported",
          "[transport][curve]") {
  CurveServer server;
  LinkSecurity intruder = LinkSecurity::generate();
  intruder.server.public_key = server.job.server.public_key; // it even knows the server key
  zmq::socket_t client = server.client(intruder, server.tcp);
  send_text(client, "from outside");

  // The handler counts a refusal before it reports it: wait for the report itself.
  REQUIRE(eventually([&] { return server.zap_log.size() >= 1; }));
  CHECK(server.zap.refused() >= 1);
  auto refusal = server.zap_log.refusals().at(0);
  CHECK(refusal.peer == "127.0.0.1");
  CHECK(refusal.mechanism == "CURVE");
  CHECK(refusal.key_prefix == key_prefix(intruder.client.public_key));
  CHECK(refusal.reason == "not a key of this job");
  CHECK(describe(refusal) == "refused CURVE peer 127.0.0.1 (key " +
                                 key_prefix(intruder.client.public_key) +
                                 "): not a key of this job");
  // The monitor counts ZAP's refusals but leaves reporting them to the handler.
  CHECK(eventually([&] { return server.monitor.failed() >= 1; }));
  CHECK(server.monitor_log.size() == 0);
  server.check_only_job_clients_got_through();
}

TEST_CASE("a plain client to a CURVE endpoint gets nothing through and is reported",
          "[transport][curve]") {
  CurveServer server;
  zmq::socket_t client = server.client(LinkSecurity::plain(), server.tcp);
  CHECK(client.get(zmq::sockopt::mechanism) == ZMQ_NULL);
  send_text(client, "from outside");

  REQUIRE(eventually([&] { return server.monitor_log.size() >= 1; }));
  auto refusal = server.monitor_log.refusals().at(0);
  CHECK(refusal.endpoint == server.tcp);
  CHECK(refusal.reason ==
        "the peer uses another security mechanism (a client without the job's keys)");
  CHECK(server.zap.refused() == 0); // ZAP is never asked about it
  server.check_only_job_clients_got_through();
}

TEST_CASE("a client that does not know the job's server key is reported", "[transport][curve]") {
  CurveServer server;
  LinkSecurity wrong_server = server.job;
  wrong_server.server = generate_curve_key_pair();
  zmq::socket_t client = server.client(wrong_server, server.tcp);
  send_text(client, "from outside");

  REQUIRE(eventually([&] { return server.monitor_log.size() >= 1; }));
  CHECK(server.monitor_log.refusals().at(0).reason ==
        "the peer's CURVE handshake does not decrypt (it does not know the job's server key)");
  server.check_only_job_clients_got_through();
}

TEST_CASE("one server socket holds a CURVE tcp endpoint and a plain ipc endpoint",
          "[transport][curve]") {
  // ZeroMQ copies the security options into each listener at bind(): what this test pins down.
  streamctl::testing::TempDir dir;
  CurveServer server;
  std::string ipc = "ipc://" + (dir.path / "gate.sock").string();
  bind_endpoint(server.context, server.socket, ipc, server.job);
  CHECK(server.socket.get(zmq::sockopt::mechanism) == ZMQ_NULL); // ZMQ_CURVE_SERVER=0 did it

  zmq::socket_t local = server.client(server.job, ipc);
  CHECK(local.get(zmq::sockopt::mechanism) == ZMQ_NULL);
  send_text(local, "over ipc");
  CHECK(receive_within(server.socket, 20s) == "over ipc");
  CHECK(server.zap.admitted() == 0); // no ZAP domain on the socket: NULL is not asked about

  // The tcp endpoint bound before still demands CURVE with the job's keys.
  zmq::socket_t plain_tcp = server.client(LinkSecurity::plain(), server.tcp);
  send_text(plain_tcp, "plain over tcp");
  REQUIRE(eventually([&] { return server.monitor_log.size() >= 1; }));
  server.check_only_job_clients_got_through();
}

TEST_CASE("one client socket connects with CURVE over tcp and plainly over ipc",
          "[transport][curve]") {
  streamctl::testing::TempDir dir;
  CurveServer remote;
  zmq::socket_t local_server = make_socket(remote.context, zmq::socket_type::pull);
  std::string ipc = "ipc://" + (dir.path / "local.sock").string();
  bind_endpoint(remote.context, local_server, ipc, remote.job);

  zmq::socket_t push = make_socket(remote.context, zmq::socket_type::push);
  connect_endpoint(push, remote.tcp, remote.job);
  connect_endpoint(push, ipc, remote.job);
  CHECK(push.get(zmq::sockopt::mechanism) == ZMQ_NULL); // a client reset by ZMQ_CURVE_SERVER=0
  // PUSH deals messages round robin over both connections: each must arrive somewhere.
  for (int i = 0; i < 10; ++i)
    send_text(push, "m");
  int over_tcp = 0;
  int over_ipc = 0;
  CHECK(eventually([&] {
    zmq::message_t m;
    if (remote.socket.recv(m, zmq::recv_flags::dontwait)) ++over_tcp;
    if (local_server.recv(m, zmq::recv_flags::dontwait)) ++over_ipc;
    return over_tcp + over_ipc == 10;
  }));
  CHECK(over_tcp > 0);
  CHECK(over_ipc > 0);
  CHECK(remote.zap.admitted() == 1);
  CHECK(remote.monitor_log.size() == 0);
}

TEST_CASE("with encryption off every endpoint is plain and needs no ZAP handler",
          "[transport][curve]") {
  zmq::context_t context;
  zmq::socket_t server = make_socket(context, zmq::socket_type::pull);
  bind_endpoint(context, server, "tcp://127.0.0.1:*", LinkSecurity::plain());
  CHECK(server.get(zmq::sockopt::mechanism) == ZMQ_NULL);
  zmq::socket_t client = make_socket(context, zmq::socket_type::push);
  connect_endpoint(client, server.get(zmq::sockopt::last_endpoint), LinkSecurity::plain());
  CHECK(client.get(zmq::sockopt::mechanism) == ZMQ_NULL);
  send_text(client, "plain");
  CHECK(receive_within(server, 20s) == "plain");
}

TEST_CASE("a CURVE endpoint is not bound without a ZAP handler", "[transport][curve]") {
  // Without a handler libzmq admits every client that knows the server's public key.
  zmq::context_t context;
  zmq::socket_t server = make_socket(context, zmq::socket_type::pull);
  CHECK_FALSE(zap_handler_bound(context));
  CHECK_THROWS_WITH(bind_endpoint(context, server, "tcp://127.0.0.1:*", LinkSecurity::generate()),
                    Catch::Contains("no ZAP handler runs in this context"));
  // An ipc endpoint stays plain, so it needs none.
  streamctl::testing::TempDir dir;
  CHECK_NOTHROW(bind_endpoint(context, server, "ipc://" + (dir.path / "s.sock").string(),
                              LinkSecurity::generate()));
}
