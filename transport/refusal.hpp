#pragma once
// A peer refused at the security handshake, as reported to the caller for logging.

#include <functional>
#include <string>

namespace streamctl::transport {

struct Refusal {
  std::string peer;       // the peer's IP address; "" when libzmq does not say (monitor events)
  std::string endpoint;   // the local endpoint it came to; "" when libzmq does not say (ZAP)
  std::string mechanism;  // "CURVE", "NULL", ... ; "" when unknown
  std::string key_prefix; // the first characters of the client's public key; "" when none
  std::string reason;     // why, in words
};

// Called on the reporting object's own thread, once per refusal; must not throw, and should be
// quick (a log line): handshakes wait behind it.
using RefusalCallback = std::function<void(const Refusal&)>;

// "refused CURVE peer 10.0.0.3 (key rq:A1b2…) on tcp://10.0.0.2:5555: not a key of this job"
std::string describe(const Refusal& refusal);

} // namespace streamctl::transport
