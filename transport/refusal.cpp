#include "transport/refusal.hpp"

namespace streamctl::transport {

std::string describe(const Refusal& refusal) {
  std::string out = "refused ";
  out += refusal.mechanism.empty() ? "a" : refusal.mechanism;
  out += " peer";
  if (!refusal.peer.empty()) out += " " + refusal.peer;
  if (!refusal.key_prefix.empty()) out += " (key " + refusal.key_prefix + ")";
  if (!refusal.endpoint.empty()) out += " on " + refusal.endpoint;
  out += ": " + refusal.reason;
  return out;
}

} // namespace streamctl::transport
