#include <catch2/catch.hpp>

#include "transport/secure_endpoint.hpp"
#include "transport/zap_handler.hpp"
#include "unit/transport/security_fixture.hpp"

using namespace streamctl::transport;
using streamctl::testing::receive_within;
using streamctl::testing::RefusalLog;
using streamctl::testing::send_text;
using namespace std::chrono_literals;

TEST_CASE("one ZAP handler per context", "[transport][curve]") {
  zmq::context_t context;
  {
    ZapHandler first(context, LinkSecurity::generate(), {});
    CHECK(zap_handler_bound(context));
    CHECK_THROWS_WITH(ZapHandler(context, LinkSecurity::generate(), {}),
                      Catch::Contains("another one runs in this context"));
  }
  // Stopped and joined: the name is free again.
  CHECK_FALSE(zap_handler_bound(context));
  ZapHandler again(context, LinkSecurity::generate(), {});
  CHECK(zap_handler_bound(context));
}

TEST_CASE("the ZAP handler admits NULL clients when asked about them", "[transport][curve]") {
  // libzmq asks ZAP about a NULL client only on a socket with a ZAP domain; ours set none,
  // but a handler asked must not lock plain local links out.
  zmq::context_t context;
  RefusalLog log;
  ZapHandler zap(context, LinkSecurity::generate(), log.callback());
  zmq::socket_t server(context, zmq::socket_type::pull);
  server.set(zmq::sockopt::linger, 0);
  server.set(zmq::sockopt::zap_domain, "test");
  server.bind("tcp://127.0.0.1:*");
  zmq::socket_t client(context, zmq::socket_type::push);
  client.set(zmq::sockopt::linger, 0);
  client.connect(server.get(zmq::sockopt::last_endpoint));
  send_text(client, "plain");
  CHECK(receive_within(server, 20s) == "plain");
  CHECK(zap.admitted() == 1);
  CHECK(zap.refused() == 0);
  CHECK(log.size() == 0);
}
