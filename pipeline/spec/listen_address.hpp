#pragma once
// "host:port", the form of `[metrics] listen` and `run --metrics-listen`: checked when the
// pipeline is validated, bound by the coordinator (runtime/metrics_server.hpp).

#include <string>
#include <string_view>

#include "state/error.hpp"

namespace streamctl::pipeline {

struct ListenAddress {
  std::string host; // an IPv4 address or a host name (not resolved here)
  int port = 0;     // 0: any free port
  std::string text() const { return host + ":" + std::to_string(port); }
};

// The address, or why `text` is not one ("no host before the port: ..."), without the text.
Result<ListenAddress> listen_address_of(std::string_view text);

} // namespace streamctl::pipeline
