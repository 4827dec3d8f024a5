#include "pipeline/spec/listen_address.hpp"

namespace streamctl::pipeline {

namespace {

constexpr std::string_view kExample = "as in 127.0.0.1:9249 (0.0.0.0:9249 for every interface)";

bool host_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '-' || c == '_';
}

} // namespace

Result<ListenAddress> listen_address_of(std::string_view text) {
  auto colon = text.rfind(':');
  if (colon == std::string_view::npos)
    return fail("give a host and a port, " + std::string(kExample));
  ListenAddress address;
  address.host = std::string(text.substr(0, colon));
  std::string_view port = text.substr(colon + 1);
  if (address.host.empty())
    return fail("no host before the port: give one, " + std::string(kExample));
  if (address.host.find(':') != std::string::npos || address.host.front() == '[')
    return fail("IPv6 addresses are not supported: give an IPv4 address or a host name");
  for (char c : address.host)
    if (!host_char(c)) return fail("'" + address.host + "' is not an IPv4 address or a host name");
  if (port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string_view::npos ||
      std::stoi(std::string(port)) > 65535)
    return fail("the port must be a number from 0 to 65535");
  address.port = std::stoi(std::string(port));
  return address;
}

} // namespace streamctl::pipeline
