#pragma once
// Which of this host's addresses a peer can reach it on: the one this host itself reaches the
// peer from. A worker on another host binds its input gate there (not on 127.0.0.1, which only
// its own host reaches) and tells the coordinator in READY; with a coordinator on loopback the
// answer is loopback, so a job on one host keeps its traffic there.

#include <string>
#include <string_view>

#include "state/error.hpp"

namespace streamctl::transport {

// The local IP address (text, IPv6 without brackets) of the route to `endpoint`'s host,
// "tcp://HOST:PORT" with HOST a name, an IPv4 address or a bracketed IPv6 address. Asks the
// kernel by connect() of a UDP socket, which sends nothing.
Result<std::string> local_address_towards(std::string_view endpoint);

// "tcp://ADDRESS:*" for that address (IPv6 in brackets): an endpoint to bind on.
Result<std::string> tcp_bind_endpoint_towards(std::string_view endpoint);

// This host's name (gethostname), for messages; "this host" when it has none.
std::string local_host_name();

} // namespace streamctl::transport
