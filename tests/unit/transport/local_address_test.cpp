#include <catch2/catch.hpp>

#include "transport/local_address.hpp"

using streamctl::transport::local_address_towards;
using streamctl::transport::tcp_bind_endpoint_towards;

TEST_CASE("a coordinator on loopback is reached from loopback", "[local_address]") {
  auto a = local_address_towards("tcp://127.0.0.1:4000");
  REQUIRE(a);
  CHECK(*a == "127.0.0.1");
  auto bind = tcp_bind_endpoint_towards("tcp://127.0.0.1:*");
  REQUIRE(bind);
  CHECK(*bind == "tcp://127.0.0.1:*");
  auto named = local_address_towards("tcp://localhost:4000");
  REQUIRE(named);
  CHECK((*named == "127.0.0.1" || *named == "::1"));
}

TEST_CASE("an IPv6 endpoint gives a bracketed bind endpoint", "[local_address]") {
  auto bind = tcp_bind_endpoint_towards("tcp://[::1]:4000");
  if (!bind)
    WARN("no IPv6 loopback here: " << bind.error());
  else
    CHECK(*bind == "tcp://[::1]:*");
}

TEST_CASE("what is not a tcp endpoint or does not resolve is an error that says so",
          "[local_address]") {
  auto a = local_address_towards("ipc:///tmp/x.sock");
  REQUIRE_FALSE(a);
  CHECK_THAT(a.error(), Catch::Contains("not a tcp:// endpoint"));
  auto b = local_address_towards("tcp://no-such-host.invalid:1");
  REQUIRE_FALSE(b);
  CHECK_THAT(b.error(), Catch::Contains("cannot resolve 'no-such-host.invalid'"));
}
