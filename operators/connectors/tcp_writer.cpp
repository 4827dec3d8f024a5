#include "operators/connectors/tcp_writer.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <linux/sockios.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

#include "state/error.hpp"

namespace streamctl::connectors {

namespace {

constexpr std::chrono::milliseconds kFirstBackoff{50};
constexpr std::chrono::milliseconds kMaxBackoff{2000};
constexpr int kConnectTimeoutMs = 5000;
// Acknowledged bytes are cut from the resend buffer once this many have piled up, so that
// trimming is not a memmove per batch.
constexpr std::size_t kTrimBytes = 256 << 10;

} // namespace

bool parse_tcp_address(std::string_view text, TcpAddress& out, std::string& why) {
  std::size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) {
    why = "expected \"host:port\"";
    return false;
  }
  std::string_view host = text.substr(0, colon);
  std::string_view port = text.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (host.empty()) {
    why = "no host before the ':'";
    return false;
  }
  if (port.empty() || port.size() > 5 ||
      !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      std::stoi(std::string(port)) < 1 || std::stoi(std::string(port)) > 65535) {
    why = "the port must be a number from 1 to 65535";
    return false;
  }
  out.host = std::string(host);
  out.port = std::string(port);
  return true;
}

TcpWriter::TcpWriter(TcpAddress address, std::string who, bool retain_until_released,
                     std::function<void(const std::string&)> warn)
    : address_(std::move(address)), who_(std::move(who)),
      retain_until_released_(retain_until_released), warn_(std::move(warn)) {}

TcpWriter::~TcpWriter() {
  abort();
}

void TcpWriter::send(std::string_view bytes) {
  resend_.append(bytes);
  for (;;) {
    if (fd_ < 0) connect_with_backoff();
    if (pump()) break;
  }
  if (!retain_until_released_) trim_acknowledged(kTrimBytes);
}

void TcpWriter::wait_acknowledged() {
  // Not connected with nothing to send again: no byte waits for an acknowledgement anywhere.
  if (fd_ < 0 && resend_.empty()) return;
  int pause_ms = 1;
  for (;;) {
    if (fd_ < 0) connect_with_backoff();
    if (!pump()) continue;
    int unacknowledged = 0;
    if (::ioctl(fd_, SIOCOUTQ, &unacknowledged) != 0) {
      drop_connection(std::string("cannot query the send queue: ") + std::strerror(errno));
      continue;
    }
    if (unacknowledged == 0) break;
    // POLLRDHUP wakes us early when the peer closes; otherwise look again shortly.
    pollfd p{fd_, POLLRDHUP, 0};
    ::poll(&p, 1, pause_ms);
    pause_ms = std::min(pause_ms * 2, 20);
    if (!still_open()) continue;
  }
  if (!retain_until_released_) trim_acknowledged(kTrimBytes);
}

void TcpWriter::release() {
  base_ += resend_.size();
  resend_.clear();
}

void TcpWriter::close() {
  if (fd_ < 0) return;
  ::shutdown(fd_, SHUT_WR);
  ::close(fd_);
  fd_ = -1;
}

void TcpWriter::abort() {
  if (fd_ < 0) return;
  ::close(fd_);
  fd_ = -1;
}

void TcpWriter::connect_with_backoff() {
  std::string why;
  while (!try_connect(why)) {
    if (!outage_logged_ && warn_)
      warn_(who_ + ": cannot connect to " + address_.host + ":" + address_.port + ": " + why +
            "; retrying with backoff, output waits");
    outage_logged_ = true;
    std::this_thread::sleep_for(backoff_);
    backoff_ = std::min(backoff_ * 2, kMaxBackoff);
  }
  if (outage_logged_ && warn_)
    warn_(who_ + ": connected to " + address_.host + ":" + address_.port);
  outage_logged_ = false;
  backoff_ = kFirstBackoff;
  // Everything not known to have reached the peer goes again, from a line's start.
  sent_ = base_;
}

bool TcpWriter::try_connect(std::string& why) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  int rc = ::getaddrinfo(address_.host.c_str(), address_.port.c_str(), &hints, &found);
  if (rc == EAI_AGAIN) {
    why = ::gai_strerror(rc); // a DNS server that does not answer now may later
    return false;
  }
  if (rc != 0)
    throw Error(ErrorKind::JobFailed,
                who_ + ": cannot resolve '" + address_.host + ":" + address_.port +
                    "': " + (rc == EAI_SYSTEM ? std::strerror(errno) : ::gai_strerror(rc)));
  struct Freer {
    addrinfo* a;
    ~Freer() { ::freeaddrinfo(a); }
  } freer{found};
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    // Non-blocking connect, so that an unreachable host costs kConnectTimeoutMs, not the
    // kernel's two minutes of SYN retries.
    int error = 0;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      error = errno;
      if (error == EINPROGRESS) {
        pollfd p{fd, POLLOUT, 0};
        int n = ::poll(&p, 1, kConnectTimeoutMs);
        socklen_t len = sizeof error;
        if (n == 0)
          error = ETIMEDOUT;
        else if (n < 0 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0)
          error = errno;
      }
    }
    if (error != 0) {
      why = std::strerror(error);
      ::close(fd);
      continue;
    }
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    // Batches go out whole; Nagle would only hold back a batch's last segment.
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fd_ = fd;
    return true;
  }
  return false;
}

void TcpWriter::drop_connection(const std::string& why) {
  // SIOCOUTQ still counts from the sequence numbers after a reset: keep exactly the lines the
  // peer's stack had not acknowledged for the next connection.
  if (!retain_until_released_) trim_acknowledged(0);
  if (warn_)
    warn_(who_ + ": connection to " + address_.host + ":" + address_.port + " lost (" + why +
          "); reconnecting");
  abort();
}

bool TcpWriter::pump() {
  if (!still_open()) return false;
  const std::uint64_t written = base_ + resend_.size();
  while (sent_ < written) {
    const char* from = resend_.data() + (sent_ - base_);
    ssize_t n = ::send(fd_, from, static_cast<std::size_t>(written - sent_), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      drop_connection(std::strerror(errno));
      return false;
    }
    sent_ += static_cast<std::uint64_t>(n);
  }
  return true;
}

bool TcpWriter::still_open() {
  // The peer sends nothing we use: read and drop it, and see whether it has closed.
  char scratch[4096];
  for (;;) {
    ssize_t n = ::recv(fd_, scratch, sizeof scratch, MSG_DONTWAIT);
    if (n > 0) continue;
    if (n == 0) {
      drop_connection("the peer closed it");
      return false;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
    drop_connection(std::strerror(errno));
    return false;
  }
}

void TcpWriter::trim_acknowledged(std::size_t at_least) {
  if (fd_ < 0) return;
  int unacknowledged = 0;
  if (::ioctl(fd_, SIOCOUTQ, &unacknowledged) != 0) return;
  const std::uint64_t acknowledged =
      sent_ - std::min<std::uint64_t>(sent_, static_cast<std::uint64_t>(unacknowledged));
  if (acknowledged <= base_ || acknowledged - base_ < at_least) return;
  // Keep the line the first unacknowledged byte is in, whole: the peer drops a cut line.
  std::size_t keep_from = static_cast<std::size_t>(acknowledged - base_);
  std::size_t newline = resend_.rfind('\n', keep_from - 1);
  if (newline == std::string::npos) return;
  resend_.erase(0, newline + 1);
  base_ += newline + 1;
}

} // namespace streamctl::connectors
