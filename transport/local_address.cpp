#include "transport/local_address.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

namespace streamctl::transport {

namespace {

struct HostPort {
  std::string host;
  std::string port;
};

Result<HostPort> split_endpoint(std::string_view endpoint) {
  constexpr std::string_view scheme = "tcp://";
  if (endpoint.substr(0, scheme.size()) != scheme)
    return Failure{"'" + std::string(endpoint) + "' is not a tcp:// endpoint"};
  std::string_view rest = endpoint.substr(scheme.size());
  std::size_t colon = rest.rfind(':');
  if (colon == std::string_view::npos || colon == 0)
    return Failure{"'" + std::string(endpoint) + "' has no host:port"};
  HostPort out{std::string(rest.substr(0, colon)), std::string(rest.substr(colon + 1))};
  if (out.host.size() >= 2 && out.host.front() == '[' && out.host.back() == ']')
    out.host = out.host.substr(1, out.host.size() - 2);
  if (out.port.empty() || out.port == "*") out.port = "9"; // any port does for a route lookup
  return out;
}

} // namespace

Result<std::string> local_address_towards(std::string_view endpoint) {
  auto target = split_endpoint(endpoint);
  if (!target) return Failure{target.error()};
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(target->host.c_str(), target->port.c_str(), &hints, &found); rc != 0)
    return Failure{"cannot resolve '" + target->host + "': " + ::gai_strerror(rc)};
  std::string why = "no address";
  std::string answer;
  for (addrinfo* a = found; a != nullptr && answer.empty(); a = a->ai_next) {
    int fd = ::socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      why = std::string("socket: ") + std::strerror(errno);
      continue;
    }
    sockaddr_storage local{};
    socklen_t size = sizeof local;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      why = std::string("no route: ") + std::strerror(errno);
    } else if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &size) != 0) {
      why = std::string("getsockname: ") + std::strerror(errno);
    } else {
      char text[INET6_ADDRSTRLEN] = {};
      const void* address =
          local.ss_family == AF_INET6
              ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr)
              : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr);
      if (::inet_ntop(local.ss_family, address, text, sizeof text) != nullptr) answer = text;
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  if (answer.empty())
    return Failure{"cannot find the local address towards '" + target->host + "': " + why};
  return answer;
}

Result<std::string> tcp_bind_endpoint_towards(std::string_view endpoint) {
  auto address = local_address_towards(endpoint);
  if (!address) return address;
  bool v6 = address->find(':') != std::string::npos;
  return "tcp://" + (v6 ? "[" + *address + "]" : *address) + ":*";
}

std::string local_host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "this host";
  return name;
}

} // namespace streamctl::transport
