#include "transport/curve_keys.hpp"

#include <array>

#include <zmq.h>

namespace streamctl::transport {

namespace {

constexpr std::size_t kZ85KeyChars = 40;

// Empty when the text is a valid Z85 key pair, else why not.
std::string check_key_pair(const CurveKeyPair& pair, const std::string& name) {
  for (const std::string* key : {&pair.public_key, &pair.secret_key}) {
    std::array<std::uint8_t, 32> binary{};
    if (key->size() != kZ85KeyChars || zmq_z85_decode(binary.data(), key->c_str()) == nullptr)
      return "link." + name + (key == &pair.public_key ? "_public" : "_secret") +
             " is not a CURVE key (40 Z85 characters)";
  }
  std::array<char, kZ85KeyChars + 1> derived{};
  if (zmq_curve_public(derived.data(), pair.secret_key.c_str()) != 0 ||
      pair.public_key != derived.data())
    return "link." + name + "_public does not belong to link." + name + "_secret";
  return {};
}

} // namespace

CurveKeyPair generate_curve_key_pair() {
  if (zmq_has("curve") == 0)
    throw Error(ErrorKind::Internal,
                "this libzmq was built without CURVE (zmq_has(\"curve\") is false), so links "
                "between hosts cannot be encrypted: install a libzmq built with libsodium, or "
                "set [cluster] encrypt = false on a trusted network");
  std::array<char, kZ85KeyChars + 1> public_key{};
  std::array<char, kZ85KeyChars + 1> secret_key{};
  if (zmq_curve_keypair(public_key.data(), secret_key.data()) != 0)
    throw Error(ErrorKind::Internal,
                std::string("cannot make a CURVE key pair: ") + zmq_strerror(zmq_errno()));
  return {public_key.data(), secret_key.data()};
}

LinkSecurity LinkSecurity::generate() {
  return {true, generate_curve_key_pair(), generate_curve_key_pair()};
}

std::string key_prefix(std::string_view z85_public_key) {
  return std::string(z85_public_key.substr(0, 8)) + "…";
}

std::string LinkSecurity::describe() const {
  if (!encrypt) return "plain";
  return "CURVE (server key " + key_prefix(server.public_key) + ", client key " +
         key_prefix(client.public_key) + ")";
}

void write_link_security(const LinkSecurity& security, ControlMessage& into) {
  into.set("link.encrypt", security.encrypt ? "1" : "0");
  if (!security.encrypt) return;
  into.set("link.server_public", security.server.public_key);
  into.set("link.server_secret", security.server.secret_key);
  into.set("link.client_public", security.client.public_key);
  into.set("link.client_secret", security.client.secret_key);
}

Result<LinkSecurity> read_link_security(const ControlMessage& from) {
  const std::string& encrypt = from.get("link.encrypt");
  if (encrypt == "0") return LinkSecurity::plain();
  if (encrypt != "1") return fail("link.encrypt must be 1 or 0, not \"" + encrypt + "\"");
  LinkSecurity security;
  security.encrypt = true;
  security.server = {from.get("link.server_public"), from.get("link.server_secret")};
  security.client = {from.get("link.client_public"), from.get("link.client_secret")};
  for (const auto& [pair, name] :
       {std::pair{&security.server, "server"}, std::pair{&security.client, "client"}}) {
    std::string problem = check_key_pair(*pair, name);
    if (!problem.empty()) return fail(problem);
  }
  return security;
}

} // namespace streamctl::transport
