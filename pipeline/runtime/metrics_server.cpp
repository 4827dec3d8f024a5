#include "pipeline/runtime/metrics_server.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "state/error.hpp"

namespace streamctl::runtime {

namespace {

constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";

// Why bind() failed, in words for the person who chose the address.
std::string bind_failure(int error) {
  switch (error) {
  case 0: return "cannot bind";
  case EADDRINUSE: return "address in use";
  case EADDRNOTAVAIL: return "not an address of this host";
  case EACCES: return "permission denied (ports under 1024 need privileges)";
  default: return std::system_category().message(error);
  }
}

} // namespace

ListenAddress parse_listen_address(std::string_view text, std::string_view what) {
  auto address = pipeline::listen_address_of(text);
  if (!address)
    throw Error(ErrorKind::Usage,
                std::string(what) + " = \"" + std::string(text) + "\": " + address.error());
  return *address;
}

struct MetricsServer::Impl {
  int listener = -1;
  int wake = -1; // an eventfd: the destructor's "stop"
  int port = 0;
  std::thread thread;
  std::mutex mutex; // guards text
  std::shared_ptr<const std::string> text = std::make_shared<const std::string>();

  ~Impl() {
    if (listener >= 0) ::close(listener);
    if (wake >= 0) ::close(wake);
  }
  std::shared_ptr<const std::string> latest() {
    std::lock_guard lock(mutex);
    return text;
  }
  void serve();
  std::string answer(std::string_view request);
};

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kMaxConnections = 16;
constexpr std::size_t kMaxRequestHead = 8192;
constexpr auto kConnectionTime = std::chrono::seconds(2);

struct Connection {
  int fd = -1;
  Clock::time_point deadline;
  std::string request;  // what came so far, up to the end of its head
  std::string response; // empty until the head is whole
  std::size_t sent = 0;
  // All sent, its write side shut: what the client still sends (the rest of a head too large,
  // a body) is read and dropped until it closes, since closing with unread input resets the
  // connection, and the reset can destroy the answer before the client reads it.
  bool draining = false;
};

std::string response(std::string_view status, std::string_view extra_headers, std::string_view body,
                     bool with_body) {
  std::string out = "HTTP/1.1 ";
  out.append(status).append("\r\nContent-Type: ").append(kContentType);
  out.append("\r\nContent-Length: ").append(std::to_string(body.size()));
  out.append("\r\nConnection: close\r\n").append(extra_headers).append("\r\n");
  if (with_body) out.append(body);
  return out;
}

// Reads what the connection has (true: keep it); a whole head gets `answer(head)`, one longer
// than kMaxRequestHead a 431.
template <typename Answer> bool read_request(Connection& c, Answer&& answer) {
  char buf[2048];
  for (;;) {
    ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
    if (n == 0) return false; // closed before a whole request
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    c.request.append(buf, static_cast<std::size_t>(n));
    auto end = c.request.find("\r\n\r\n");
    if (end != std::string::npos && end <= kMaxRequestHead) {
      c.response = answer(std::string_view(c.request).substr(0, end));
      return true;
    }
    if (c.request.size() > kMaxRequestHead) {
      c.response = response("431 Request Header Fields Too Large", "", "request head too large\n", true);
      return true;
    }
  }
}

// Sends what is left of the answer, then starts draining (true: keep the connection).
bool write_response(Connection& c) {
  while (c.sent < c.response.size()) {
    ssize_t n = ::send(c.fd, c.response.data() + c.sent, c.response.size() - c.sent, MSG_NOSIGNAL);
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    c.sent += static_cast<std::size_t>(n);
  }
  ::shutdown(c.fd, SHUT_WR);
  c.draining = true;
  return true;
}

// Reads and drops input until the client closes (true: keep the connection).
bool drain(Connection& c) {
  char buf[2048];
  for (;;) {
    ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
    if (n == 0) return false;
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  }
}

} // namespace

// The answer to one request head ("GET /metrics HTTP/1.1\r\nHost: ...").
std::string MetricsServer::Impl::answer(std::string_view head) {
  std::string_view line = head.substr(0, head.find("\r\n"));
  auto first = line.find(' ');
  auto second = first == std::string_view::npos ? first : line.find(' ', first + 1);
  if (second == std::string_view::npos) return response("400 Bad Request", "", "bad request\n", true);
  std::string_view method = line.substr(0, first);
  std::string_view target = line.substr(first + 1, second - first - 1);
  std::string_view path = target.substr(0, target.find('?'));
  bool head_only = method == "HEAD";
  if (method != "GET" && !head_only)
    return response("405 Method Not Allowed", "Allow: GET, HEAD\r\n", "method not allowed\n", true);
  if (path != "/metrics") return response("404 Not Found", "", "not found: try /metrics\n", !head_only);
  auto body = latest();
  return response("200 OK", "", *body, !head_only);
}

void MetricsServer::Impl::serve() {
  std::vector<Connection> connections;
  std::vector<pollfd> fds;
  for (;;) {
    auto now = Clock::now();
    std::erase_if(connections, [now](Connection& c) {
      if (c.fd >= 0 && now < c.deadline) return false;
      if (c.fd >= 0) ::close(c.fd);
      return true;
    });
    fds.assign({{wake, POLLIN, 0}, {listener, static_cast<short>(connections.size() < kMaxConnections ? POLLIN : 0), 0}});
    int timeout = -1;
    for (const auto& c : connections) {
      fds.push_back({c.fd, static_cast<short>(c.response.empty() || c.draining ? POLLIN : POLLOUT), 0});
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(c.deadline - now).count() + 1;
      timeout = timeout < 0 ? static_cast<int>(left) : std::min(timeout, static_cast<int>(left));
    }
    if (::poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) break;
    if (fds[0].revents) break; // stop
    for (std::size_t k = 0; k < connections.size(); ++k) {
      Connection& c = connections[k];
      short ready = fds[k + 2].revents;
      if (!ready) continue;
      bool keep = true;
      if (c.draining) {
        keep = drain(c);
      } else {
        if (c.response.empty()) keep = read_request(c, [this](std::string_view head) { return answer(head); });
        if (keep && !c.response.empty()) keep = write_response(c);
      }
      if (!keep) {
        ::close(c.fd);
        c.fd = -1; // removed at the top of the loop
      }
    }
    if (fds[1].revents & POLLIN)
      while (connections.size() < kMaxConnections) {
        int fd = ::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;
        connections.push_back(Connection{fd, Clock::now() + kConnectionTime, {}, {}, 0});
      }
  }
  for (auto& c : connections)
    if (c.fd >= 0) ::close(c.fd);
}

MetricsServer::MetricsServer(const ListenAddress& address, std::string_view what)
    : impl_(std::make_unique<Impl>()) {
  auto refuse = [&](const std::string& why) {
    return Error(ErrorKind::Usage,
                 "cannot listen on " + address.text() + " for " + std::string(what) + ": " + why);
  };
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  std::string port = std::to_string(address.port);
  if (int rc = getaddrinfo(address.host.c_str(), port.c_str(), &hints, &found); rc != 0)
    throw refuse("cannot resolve " + address.host + ": " + gai_strerror(rc));
  int error = 0;
  for (addrinfo* a = found; a && impl_->listener < 0; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      error = errno;
      continue;
    }
    // SO_REUSEADDR lets a job rebind a port just released; never SO_REUSEPORT, with which a
    // second job binds the same port and the two share its scrapes.
    int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 16) == 0) {
      impl_->listener = fd;
    } else {
      error = errno;
      ::close(fd);
    }
  }
  freeaddrinfo(found);
  if (impl_->listener < 0) throw refuse(bind_failure(error));
  sockaddr_storage bound{};
  socklen_t length = sizeof bound;
  ::getsockname(impl_->listener, reinterpret_cast<sockaddr*>(&bound), &length);
  impl_->port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                                  : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  impl_->wake = ::eventfd(0, EFD_CLOEXEC);
  if (impl_->wake < 0) throw refuse(std::system_category().message(errno));
  impl_->thread = std::thread([impl = impl_.get()] { impl->serve(); });
}

MetricsServer::~MetricsServer() {
  std::uint64_t one = 1;
  if (::write(impl_->wake, &one, sizeof one) < 0) {
    // An eventfd's counter does not overflow from one write; nothing else can fail here.
  }
  if (impl_->thread.joinable()) impl_->thread.join();
}

void MetricsServer::publish(std::string text) {
  auto next = std::make_shared<const std::string>(std::move(text));
  std::lock_guard lock(impl_->mutex);
  impl_->text.swap(next);
  // The old text is freed outside the lock, as `next` goes, unless a scrape still holds it.
}

int MetricsServer::port() const {
  return impl_->port;
}

std::unique_ptr<MetricsServer> serve_metrics(const pipeline::PipelineSpec& spec,
                                             spdlog::logger& log) {
  constexpr std::string_view what = "[metrics] listen";
  auto listen = spec.root["metrics"]["listen"].value<std::string>();
  if (!listen) return nullptr;
  auto address = parse_listen_address(*listen, what);
  auto server = std::make_unique<MetricsServer>(address, what);
  log.info("metrics: Prometheus text on http://{}:{}/metrics", address.host, server->port());
  return server;
}

} // namespace streamctl::runtime
