#pragma once
// The job's CurveZMQ keys and whether links that leave a host use them.
//
// The coordinator makes two key pairs per job: every server socket of the job (the
// coordinator's control ROUTER, each worker's input gate) presents the server pair, and every
// client socket presents the client pair; the ZAP handler of each process admits only the
// job's client public key. A process outside the job knows neither secret, so it can neither
// pose as a server (clients check the server key) nor be admitted as a client.
//
// The keys travel to workers in their bootstrap message (written into a pipe, or ssh's stdin),
// never on a command line, where `ps` on any host would show them. Secret keys are never
// logged: describe() and key_prefix() show only a few characters of a public key.

#include <string>
#include <string_view>

#include "state/error.hpp"
#include "transport/control.hpp"

namespace streamctl::transport {

// Z85 text, 40 characters each (32 bytes of key).
struct CurveKeyPair {
  std::string public_key;
  std::string secret_key;
};

struct LinkSecurity {
  bool encrypt = false;
  CurveKeyPair server;
  CurveKeyPair client;

  // Encryption off; no keys.
  static LinkSecurity plain() { return {}; }
  // Encryption on, with two fresh key pairs. Throws Error(Internal) when libzmq lacks CURVE.
  static LinkSecurity generate();
  // "CURVE (server key rq:A1b2…, client key 0Zx!c…)" or "plain": no secret in it.
  std::string describe() const;
};

// A fresh key pair from zmq_curve_keypair. Throws Error(Internal) when libzmq was built
// without CURVE (zmq_has("curve") is false), saying how to run without encryption.
CurveKeyPair generate_curve_key_pair();

// The first characters of a Z85 public key, enough to tell keys apart in a log.
std::string key_prefix(std::string_view z85_public_key);

// The keys as text fields of a control message (the worker's bootstrap), under the names
//   link.encrypt = "1" | "0"
//   link.server_public, link.server_secret, link.client_public, link.client_secret = Z85
// (the four keys only when link.encrypt is "1"). Other fields of `into` are left alone.
void write_link_security(const LinkSecurity& security, ControlMessage& into);
// Checks each key (40 Z85 characters, and each public key derived from its secret) and says
// which field is wrong, without quoting a secret.
Result<LinkSecurity> read_link_security(const ControlMessage& from);

} // namespace streamctl::transport
