// The tcp sink's `address`: "host:port" or "[v6]:port", anything else refused with the reason
// (the sink's factory reports it with the key's position).

#include <catch2/catch.hpp>

#include "operators/connectors/tcp_writer.hpp"

using streamctl::connectors::parse_tcp_address;
using streamctl::connectors::TcpAddress;

TEST_CASE("tcp addresses parse as host and port", "[tcp_sink]") {
  TcpAddress a;
  std::string why;
  REQUIRE(parse_tcp_address("collector.example.org:9000", a, why));
  CHECK(a.host == "collector.example.org");
  CHECK(a.port == "9000");
  REQUIRE(parse_tcp_address("[::1]:80", a, why));
  CHECK(a.host == "::1");
  CHECK(a.port == "80");
}

TEST_CASE("malformed tcp addresses are refused with a reason", "[tcp_sink]") {
  TcpAddress a;
  std::string why;
  for (const char* bad :
       {"localhost", ":9000", "host:", "host:0", "host:65536", "host:9x", "host:1234567"}) {
    INFO(bad);
    CHECK_FALSE(parse_tcp_address(bad, a, why));
    CHECK_FALSE(why.empty());
  }
}
