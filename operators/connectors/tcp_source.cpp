#include "operators/connectors/tcp_source.hpp"

#include <cerrno>
#include <cstring>
#include <map>
#include <netdb.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "operators/connectors/line_framer.hpp"
#include "operators/connectors/live_source_options.hpp"
#include "operators/spooled_line_source.hpp"
#include "operators/text_format_schema.hpp"

namespace streamctl::connectors {

namespace {

// Bytes read from one socket at a time.
constexpr std::size_t kReadBytes = 256 << 10;

struct Endpoint {
  std::string host, port;
};

// "HOST:PORT", "[V6]:PORT"; nullopt with a reason in `why` when malformed.
std::optional<Endpoint> split_address(const std::string& address, std::string& why) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    why = "address '" + address + "' is not HOST:PORT";
    return std::nullopt;
  }
  Endpoint e{address.substr(0, colon), address.substr(colon + 1)};
  if (e.host.size() > 2 && e.host.front() == '[' && e.host.back() == ']')
    e.host = e.host.substr(1, e.host.size() - 2);
  char* end = nullptr;
  long port = std::strtol(e.port.c_str(), &end, 10);
  if (*end != '\0' || port < 1 || port > 65535) {
    why = "port of address '" + address + "' must be 1 to 65535 (a listener needs a fixed port)";
    return std::nullopt;
  }
  return e;
}

// A listening, non-blocking socket on `e`, or -1 with the reason in `why`.
int listen_on(const Endpoint& e, std::string& why) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(e.host.c_str(), e.port.c_str(), &hints, &found); rc != 0) {
    why = "cannot resolve '" + e.host + "': " + ::gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int on = 1;
    // A restarted worker binds again while the dead one's connections sit in TIME_WAIT.
    (void)::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 128) == 0) break;
    why = std::strerror(errno);
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(found);
  return fd;
}

class TcpSource final : public operators::SpooledLineSource {
public:
  TcpSource(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node,
            state::FieldNames& names, Endpoint endpoint, std::string where,
            LiveSourceOptions options)
      : SpooledLineSource(spec, node, names, "tcp", 'T'), endpoint_(std::move(endpoint)),
        where_(std::move(where)), options_(options), buffer_(kReadBytes) {}

  ~TcpSource() override {
    for (auto& [fd, framer] : connections_)
      ::close(fd);
    if (listen_fd_ >= 0) ::close(listen_fd_);
    if (epoll_fd_ >= 0) ::close(epoll_fd_);
  }

  // Listens here, before any record flows: an address in use fails the job at once.
  void open(operators::OperatorContext& ctx) override {
    SpooledLineSource::open(ctx);
    std::string why;
    listen_fd_ = listen_on(endpoint_, why);
    if (listen_fd_ < 0)
      throw Error(ErrorKind::Usage, where_ + ": cannot listen on " + address() + ": " + why);
    epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd_ < 0)
      throw Error(ErrorKind::JobFailed, where_ + ": epoll: " + std::strerror(errno));
    watch(listen_fd_);
    last_activity_ms_ = monotonic_ms();
  }

protected:
  bool pump_input(std::size_t budget) override {
    framed_.clear();
    epoll_event events[64];
    std::size_t moved = 0;
    while (moved < budget) {
      int n = ::epoll_wait(epoll_fd_, events, 64, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0)
        throw Error(ErrorKind::JobFailed, where_ + ": epoll_wait: " + std::strerror(errno));
      if (n == 0) break;
      for (int k = 0; k < n; ++k) {
        int fd = events[k].data.fd;
        if (fd == listen_fd_)
          accept_all();
        else
          moved += read_from(fd);
      }
    }
    if (!framed_.empty()) append(framed_);
    if (moved > 0) last_activity_ms_ = monotonic_ms();
    if (options_.end_after_idle_ms > 0 && accepted_any_ && connections_.empty() &&
        monotonic_ms() - last_activity_ms_ >= options_.end_after_idle_ms) {
      ::close(listen_fd_);
      listen_fd_ = -1;
      return true;
    }
    return false;
  }
  int input_readiness_fd() const override { return epoll_fd_; }

private:
  std::string address() const { return endpoint_.host + ":" + endpoint_.port; }

  void watch(int fd) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0)
      throw Error(ErrorKind::JobFailed, where_ + ": epoll_ctl: " + std::strerror(errno));
  }

  void accept_all() {
    for (;;) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        return; // EAGAIN, or out of descriptors: the rest wait in the backlog
      }
      watch(fd);
      connections_.emplace(
          fd, LineFramer(options_.max_line, [this](std::string_view head, std::size_t length) {
            ctx_.errors->bad_record(head, 0, too_long_reason(length, options_.max_line));
          }));
      accepted_any_ = true;
      last_activity_ms_ = monotonic_ms();
    }
  }

  // Reads once from connection `fd`; returns the bytes read. A closed or reset connection
  // gives its unterminated last line as a record and is forgotten.
  std::size_t read_from(int fd) {
    auto it = connections_.find(fd);
    if (it == connections_.end()) return 0;
    ssize_t n;
    do
      n = ::read(fd, buffer_.data(), buffer_.size());
    while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    if (n > 0) {
      it->second.feed(std::string_view(buffer_.data(), static_cast<std::size_t>(n)), framed_);
      return static_cast<std::size_t>(n);
    }
    it->second.finish(framed_);
    (void)::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
    ::close(fd);
    connections_.erase(it);
    last_activity_ms_ = monotonic_ms();
    return 0;
  }

  Endpoint endpoint_;
  std::string where_; // "FILE:LINE:COL: source 'NAME'" of `address`
  LiveSourceOptions options_;
  int listen_fd_ = -1;
  int epoll_fd_ = -1; // the listening socket and every connection: the readiness fd
  std::map<int, LineFramer> connections_;
  std::vector<char> buffer_;
  std::string framed_; // whole lines of this pump, appended at once
  bool accepted_any_ = false;
  std::int64_t last_activity_ms_ = 0;
};
} // namespace

pipeline::NodeTypeSchema tcp_source_schema() {
  pipeline::NodeTypeSchema schema{"tcp", operators::text_format_keys()};
  schema.keys.insert(schema.keys.begin(),
                     pipeline::KeySchema{"address",
                                         pipeline::KeyType::String,
                                         true,
                                         {},
                                         {},
                                         "HOST:PORT to listen on, e.g. \"127.0.0.1:9000\""});
  for (auto& key : live_source_keys(true))
    schema.keys.push_back(std::move(key));
  schema.one_subtask = true;
  return schema;
}

std::unique_ptr<operators::Source> make_tcp_source(const pipeline::PipelineSpec& spec,
                                                   const pipeline::NodeSpec& node,
                                                   state::FieldNames& names) {
  std::string where = where_in(spec, node, "address");
  std::string address = node.config["address"].value_or(std::string());
  std::string why;
  auto endpoint = split_address(address, why);
  if (!endpoint) throw Error(ErrorKind::Usage, where + ": " + why);
  // No trial bind here: every worker and `rescale` load the whole job, while the job may
  // hold the address. The worker of this source binds in open(), before any record flows.
  return std::make_unique<TcpSource>(spec, node, names, std::move(*endpoint), std::move(where),
                                     read_live_source_options(spec, node));
}

} // namespace streamctl::connectors
