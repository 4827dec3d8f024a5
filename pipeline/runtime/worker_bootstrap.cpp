#include "pipeline/runtime/worker_bootstrap.hpp"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "transport/control.hpp"
#include "transport/local_address.hpp"
#include "transport/protocol.hpp"

#ifndef STREAMCTL_VERSION
#define STREAMCTL_VERSION "0.0.0"
#endif

namespace streamctl::runtime {

namespace {

constexpr std::string_view kMagic = "streamctl-bootstrap";
constexpr std::size_t kMaxHeaderBytes = 200;
// A pipeline file is at most a few MiB (config_loader.hpp); a length beyond this is garbage.
constexpr std::size_t kMaxBodyBytes = 256u << 20;

// Reads up to and without the next LF, at most `limit` bytes, one byte at a time so that
// nothing past the bootstrap is taken from the channel.
Result<std::string> read_line(int fd, std::size_t limit, const char* what) {
  std::string line;
  for (;;) {
    char c = 0;
    ssize_t n = ::read(fd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      return Failure{std::string("cannot read the bootstrap's ") + what + ": " +
                     std::strerror(errno)};
    if (n == 0)
      return Failure{std::string("the bootstrap channel ended before the bootstrap's ") + what +
                     (line.empty() ? std::string(" (it was empty)") : " (it held '" + line + "')")};
    if (c == '\n') return line;
    line += c;
    if (line.size() > limit)
      return Failure{
          std::string("the bootstrap channel does not hold a streamctl bootstrap: its ") + what +
          " is longer than " + std::to_string(limit) + " bytes"};
  }
}

Result<std::size_t> parse_size(std::string_view text) {
  std::size_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size())
    return Failure{"the bootstrap's length is not a number: '" + std::string(text) + "'"};
  if (v > kMaxBodyBytes)
    return Failure{"the bootstrap's length " + std::to_string(v) + " is beyond the " +
                   std::to_string(kMaxBodyBytes) + " bytes a bootstrap may have"};
  return v;
}

} // namespace

std::string_view streamctl_version() {
  return STREAMCTL_VERSION;
}

std::string encode_bootstrap(const WorkerBootstrap& bootstrap) {
  return encode_bootstrap(bootstrap, streamctl_version(), transport::kProtocolVersion);
}

std::string encode_bootstrap(const WorkerBootstrap& bootstrap, std::string_view version,
                             int protocol) {
  transport::ControlMessage body{"BOOTSTRAP", bootstrap.extra};
  body.set("pipeline", bootstrap.pipeline);
  for (std::size_t k = 0; k < bootstrap.overrides.size(); ++k)
    body.set("override." + std::to_string(k), bootstrap.overrides[k]);
  for (const auto& [name, value] : bootstrap.variables) body.set("variable." + name, value);
  if (!bootstrap.security.empty()) body.set("security", bootstrap.security);
  if (bootstrap.heartbeat_timeout.count() > 0)
    body.set("heartbeat_timeout_ms", std::to_string(bootstrap.heartbeat_timeout.count()));
  if (bootstrap.checkpoint_storage_coordinator) body.set("checkpoint_storage", "coordinator");
  std::string text = transport::encode_control(body);
  std::string out(kMagic);
  out += ' ';
  out += version;
  out += ' ';
  out += std::to_string(protocol);
  out += '\n';
  out += std::to_string(text.size());
  out += '\n';
  out += text;
  return out;
}

Result<BootstrapHeader> parse_bootstrap_header(std::string_view line) {
  auto not_ours = [&] {
    std::string shown(line.substr(0, 40));
    for (char& c : shown)
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
    return Failure{"the bootstrap channel does not hold a streamctl bootstrap (it starts with '" +
                   shown + "')"};
  };
  if (line.substr(0, kMagic.size()) != kMagic || line.size() <= kMagic.size() ||
      line[kMagic.size()] != ' ')
    return not_ours();
  std::string_view rest = line.substr(kMagic.size() + 1);
  std::size_t space = rest.find(' ');
  if (space == std::string_view::npos || space == 0) return not_ours();
  BootstrapHeader header;
  header.version = std::string(rest.substr(0, space));
  // Words after the protocol are left to later versions.
  std::string_view protocol = rest.substr(space + 1);
  protocol = protocol.substr(0, protocol.find(' '));
  auto [end, ec] =
      std::from_chars(protocol.data(), protocol.data() + protocol.size(), header.protocol);
  if (protocol.empty() || ec != std::errc() || end != protocol.data() + protocol.size())
    return not_ours();
  return header;
}

Result<WorkerBootstrap> decode_bootstrap_body(std::string_view body) {
  auto message = transport::decode_control(body);
  if (!message || message->type != "BOOTSTRAP")
    return Failure{"the bootstrap's body is garbled (not a BOOTSTRAP message)"};
  WorkerBootstrap out;
  std::map<std::size_t, std::string> overrides;
  for (auto& [key, value] : message->fields) {
    if (key == "pipeline") {
      out.pipeline = value;
    } else if (key == "security") {
      out.security = value;
    } else if (key == "heartbeat_timeout_ms") {
      std::int64_t ms = message->get_int(key, -1);
      if (ms < 0)
        return Failure{"the bootstrap's heartbeat_timeout_ms is not a number: '" + value + "'"};
      out.heartbeat_timeout = std::chrono::milliseconds(ms);
    } else if (key == "checkpoint_storage") {
      if (value != "coordinator")
        return Failure{"the bootstrap's checkpoint_storage is not \"coordinator\": '" + value + "'"};
      out.checkpoint_storage_coordinator = true;
    } else if (key.rfind("variable.", 0) == 0 && key.size() > 9) {
      out.variables[key.substr(9)] = value;
    } else if (key.rfind("override.", 0) == 0) {
      std::size_t n = 0;
      std::string_view digits = std::string_view(key).substr(9);
      auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
      if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size())
        return Failure{"the bootstrap has a garbled field '" + key + "'"};
      overrides[n] = value;
    } else {
      out.extra[key] = value;
    }
  }
  if (!message->fields.count("pipeline")) return Failure{"the bootstrap holds no pipeline"};
  std::size_t expected = 0;
  for (auto& [n, value] : overrides) {
    if (n != expected++) return Failure{"the bootstrap's overrides are not numbered 0, 1, 2, ..."};
    out.overrides.push_back(std::move(value));
  }
  return out;
}

WorkerBootstrap read_bootstrap(int fd) {
  auto line = read_line(fd, kMaxHeaderBytes, "header");
  if (!line) throw Error(ErrorKind::Internal, line.error());
  auto header = parse_bootstrap_header(*line);
  if (!header) throw Error(ErrorKind::Internal, header.error());
  if (header->version != streamctl_version() || header->protocol != transport::kProtocolVersion) {
    throw Error(ErrorKind::Usage, "streamctl worker on host '" + transport::local_host_name() + "' is version " +
                                      std::string(streamctl_version()) + " (protocol " +
                                      std::to_string(transport::kProtocolVersion) +
                                      ") but its coordinator is version " + header->version +
                                      " (protocol " + std::to_string(header->protocol) +
                                      "): install the coordinator's version on every host, or set "
                                      "`[cluster] ship_binary = true` "
                                      "to copy the coordinator's binary to them");
  }
  auto length_line = read_line(fd, 20, "length");
  if (!length_line) throw Error(ErrorKind::Internal, length_line.error());
  auto length = parse_size(*length_line);
  if (!length) throw Error(ErrorKind::Internal, length.error());
  std::string body(*length, '\0');
  std::size_t done = 0;
  while (done < body.size()) {
    ssize_t n = ::read(fd, body.data() + done, body.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      throw Error(ErrorKind::Internal,
                  std::string("cannot read the bootstrap: ") + std::strerror(errno));
    if (n == 0)
      throw Error(ErrorKind::Internal, "the bootstrap channel ended after " + std::to_string(done) +
                                           " of the " + std::to_string(body.size()) +
                                           " bytes of its bootstrap");
    done += static_cast<std::size_t>(n);
  }
  auto decoded = decode_bootstrap_body(body);
  if (!decoded) throw Error(ErrorKind::Internal, decoded.error());
  return std::move(*decoded);
}

BootstrapChannelWatch::BootstrapChannelWatch(int fd, std::function<void()> on_close) {
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC);
  if (wake_fd_ < 0)
    throw Error(ErrorKind::Internal, std::string("cannot watch the bootstrap channel: eventfd: ") +
                                         std::strerror(errno));
  thread_ = std::thread([this, fd, on_close = std::move(on_close)] { run(fd, on_close); });
}

BootstrapChannelWatch::~BootstrapChannelWatch() {
  std::uint64_t one = 1;
  while (::write(wake_fd_, &one, sizeof one) < 0 && errno == EINTR) {
  }
  thread_.join();
  ::close(wake_fd_);
}

void BootstrapChannelWatch::run(int fd, const std::function<void()>& on_close) {
  for (;;) {
    pollfd items[] = {{fd, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    int n = ::poll(items, 2, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return; // cannot watch: the heartbeat still ends a worker left alone
    if (items[1].revents != 0) return;
    if (items[0].revents == 0) continue;
    // Nothing more is sent after the bootstrap, but whatever comes is read and dropped so
    // that only EOF (or an error: POLLERR, POLLNVAL) counts as the end.
    char buffer[512];
    ssize_t r = ::read(fd, buffer, sizeof buffer);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (r > 0) continue;
    break;
  }
  on_close();
}

} // namespace streamctl::runtime
