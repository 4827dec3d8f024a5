#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <chrono>
#include <functional>
#include <netinet/in.h>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

#include "pipeline/runtime/metrics_server.hpp"
#include "state/error.hpp"

using namespace streamctl;
using namespace streamctl::runtime;

namespace {

// One HTTP/1.0 request to 127.0.0.1:port over a plain socket; the whole response.
std::string http_get(int port, const std::string& path) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<std::uint16_t>(port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0);
  std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  REQUIRE(::send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size()));
  std::string response;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;)
    response.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return response;
}

std::string usage_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Usage);
    return e.what();
  }
  FAIL("no error");
  return {};
}

} // namespace

TEST_CASE("metrics server: GET /metrics answers the latest text, other paths 404") {
  MetricsServer server(parse_listen_address("127.0.0.1:0", "test"), "test");
  REQUIRE(server.port() > 0);
  auto empty = http_get(server.port(), "/metrics");
  CHECK(empty.rfind("HTTP/1.1 200", 0) == 0);
  server.publish("streamctl_x 1\n");
  server.publish("streamctl_x 2\n");
  auto latest = http_get(server.port(), "/metrics");
  CHECK(latest.find("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n") !=
        std::string::npos);
  CHECK(latest.substr(latest.size() - 14) == "streamctl_x 2\n");
  CHECK(http_get(server.port(), "/").rfind("HTTP/1.1 404", 0) == 0);
  CHECK(http_get(server.port(), "/metrics/x").rfind("HTTP/1.1 404", 0) == 0);
}

// A job that ended while Prometheus held its connection open for the next scrape exited 5 s
// later: stop() waited out httplib's keep-alive timeout.
TEST_CASE("metrics server: stops within a second or two while a client holds a connection") {
  int fd = -1, idle = -1;
  auto started = std::chrono::steady_clock::now();
  {
    MetricsServer server(parse_listen_address("127.0.0.1:0", "test"), "test");
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<std::uint16_t>(server.port()));
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0);
    std::string request = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    REQUIRE(::send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size()));
    char buf[512];
    REQUIRE(::recv(fd, buf, sizeof buf, 0) > 0); // answered; the connection may stay open
    // And one that has sent nothing yet, which httplib waits for as for a next request.
    idle = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(::connect(idle, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(100)); // accepted by then
    started = std::chrono::steady_clock::now();
  }
  auto took = std::chrono::steady_clock::now() - started;
  ::close(fd);
  ::close(idle);
  CHECK(took < std::chrono::milliseconds(2500));
}

// httplib's default socket options set SO_REUSEPORT, with which a second job bound the same
// port as the first and both answered its scrapes in turn.
TEST_CASE("metrics server: a port in use is refused, naming the address and why") {
  MetricsServer first(parse_listen_address("127.0.0.1:0", "test"), "test");
  auto address = "127.0.0.1:" + std::to_string(first.port());
  auto message = usage_error(
      [&] { MetricsServer second(parse_listen_address(address, "x"), "[metrics] listen"); });
  CHECK(message == "cannot listen on " + address + " for [metrics] listen: address in use");
}

TEST_CASE("metrics server: an unresolvable host is refused") {
  auto message = usage_error([] {
    MetricsServer server(parse_listen_address("no-such-host.invalid:0", "x"), "--metrics-listen");
  });
  CHECK(
      message.rfind("cannot listen on no-such-host.invalid:0 for --metrics-listen: cannot resolve",
                    0) == 0);
}

TEST_CASE("metrics server: listen addresses are host:port") {
  auto ok = parse_listen_address("localhost:9249", "w");
  CHECK(ok.host == "localhost");
  CHECK(ok.port == 9249);
  CHECK(parse_listen_address("0.0.0.0:65535", "w").port == 65535);
  CHECK(usage_error([] { parse_listen_address(":9249", "[metrics] listen"); }) ==
        "[metrics] listen = \":9249\": no host before the port: give one, as in 127.0.0.1:9249 "
        "(0.0.0.0:9249 for "
        "every interface)");
  CHECK(usage_error([] { parse_listen_address("9249", "w"); }).find("give a host and a port") !=
        std::string::npos);
  CHECK(usage_error([] { parse_listen_address("h:", "w"); }).find("the port must be") !=
        std::string::npos);
  CHECK(usage_error([] { parse_listen_address("h:65536", "w"); }).find("the port must be") !=
        std::string::npos);
  CHECK(usage_error([] { parse_listen_address("h:x1", "w"); }).find("the port must be") !=
        std::string::npos);
  CHECK(usage_error([] { parse_listen_address("[::1]:9", "w"); }).find("IPv6") !=
        std::string::npos);
  CHECK(usage_error([] {
          parse_listen_address("a b:9", "w");
        }).find("not an IPv4 address or a host name") != std::string::npos);
}
