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

int connect_to(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<std::uint16_t>(port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0);
  return fd;
}

// `request` sent whole to 127.0.0.1:port over a plain socket; the whole response.
std::string http_exchange(int port, const std::string& request) {
  int fd = connect_to(port);
  REQUIRE(::send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size()));
  std::string response;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;)
    response.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return response;
}

// One HTTP/1.0 GET of `path`.
std::string http_get(int port, const std::string& path) {
  return http_exchange(port, "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
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

TEST_CASE("metrics server: HEAD, a query string, other methods and malformed requests") {
  MetricsServer server(parse_listen_address("127.0.0.1:0", "test"), "test");
  server.publish("streamctl_x 3\n");
  auto head = http_exchange(server.port(), "HEAD /metrics HTTP/1.1\r\nHost: h\r\n\r\n");
  CHECK(head.rfind("HTTP/1.1 200", 0) == 0);
  CHECK(head.find("Content-Length: 14\r\n") != std::string::npos);
  CHECK(head.size() >= 4);
  CHECK(head.substr(head.size() - 4) == "\r\n\r\n"); // no body
  auto query = http_get(server.port(), "/metrics?name[]=streamctl_x");
  CHECK(query.substr(query.size() - 14) == "streamctl_x 3\n");
  auto post = http_exchange(server.port(), "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
  CHECK(post.rfind("HTTP/1.1 405", 0) == 0);
  CHECK(post.find("Allow: GET, HEAD\r\n") != std::string::npos);
  CHECK(http_exchange(server.port(), "nonsense\r\n\r\n").rfind("HTTP/1.1 400", 0) == 0);
  std::string huge = "GET /metrics HTTP/1.1\r\nX: " + std::string(10000, 'x') + "\r\n\r\n";
  auto too_large = http_exchange(server.port(), huge);
  INFO(too_large);
  CHECK(too_large.rfind("HTTP/1.1 431", 0) == 0);
}

// Connections are served side by side: one that never sends its request holds no one else up,
// and one that sends it in pieces is answered once it is whole.
TEST_CASE("metrics server: a silent client does not hold up a scrape; a request may come in pieces") {
  MetricsServer server(parse_listen_address("127.0.0.1:0", "test"), "test");
  std::string body(200000, 'm'); // more than a socket buffer: written over several polls
  body.back() = '\n';
  server.publish(body);
  int silent = connect_to(server.port());
  auto started = std::chrono::steady_clock::now();
  auto answer = http_get(server.port(), "/metrics");
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::milliseconds(1000));
  REQUIRE(answer.size() > body.size());
  CHECK(answer.substr(answer.size() - body.size()) == body);
  int pieces = connect_to(server.port());
  for (std::string part : {"GET /met", "rics HTTP/1.1\r\n", "Host: h\r\n", "\r\n"}) {
    REQUIRE(::send(pieces, part.data(), part.size(), 0) == static_cast<ssize_t>(part.size()));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  char buf[64];
  ssize_t n = ::recv(pieces, buf, sizeof buf, 0);
  REQUIRE(n > 12);
  CHECK(std::string(buf, 12) == "HTTP/1.1 200");
  ::close(pieces);
  // The silent one is dropped after its 2 s: the server closes it.
  timeval wait{4, 0};
  ::setsockopt(silent, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
  CHECK(::recv(silent, buf, sizeof buf, 0) == 0);
  ::close(silent);
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
