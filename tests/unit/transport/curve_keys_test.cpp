#include <catch2/catch.hpp>

#include "transport/curve_keys.hpp"

using namespace streamctl::transport;

TEST_CASE("a job's link security survives its bootstrap text fields", "[transport][curve]") {
  LinkSecurity security = LinkSecurity::generate();
  CHECK(security.encrypt);
  CHECK(security.server.public_key.size() == 40);
  CHECK(security.server.secret_key.size() == 40);
  CHECK(security.server.public_key != security.client.public_key);

  ControlMessage bootstrap{"BOOTSTRAP", {{"task", "3"}}};
  write_link_security(security, bootstrap);
  auto decoded = decode_control(encode_control(bootstrap));
  REQUIRE(decoded);
  CHECK(decoded->get("task") == "3");
  auto read = read_link_security(*decoded);
  REQUIRE(read.ok());
  CHECK(read->encrypt);
  CHECK(read->server.public_key == security.server.public_key);
  CHECK(read->server.secret_key == security.server.secret_key);
  CHECK(read->client.public_key == security.client.public_key);
  CHECK(read->client.secret_key == security.client.secret_key);
}

TEST_CASE("encryption off travels as one field and no keys", "[transport][curve]") {
  ControlMessage bootstrap{"BOOTSTRAP", {}};
  write_link_security(LinkSecurity::plain(), bootstrap);
  CHECK(bootstrap.fields.size() == 1);
  CHECK(bootstrap.get("link.encrypt") == "0");
  auto read = read_link_security(bootstrap);
  REQUIRE(read.ok());
  CHECK_FALSE(read->encrypt);
}

TEST_CASE("a damaged key is named without quoting the secret", "[transport][curve]") {
  LinkSecurity security = LinkSecurity::generate();
  ControlMessage bootstrap{"BOOTSTRAP", {}};

  SECTION("a short secret") {
    write_link_security(security, bootstrap);
    bootstrap.set("link.client_secret", security.client.secret_key.substr(0, 39));
    auto read = read_link_security(bootstrap);
    REQUIRE_FALSE(read.ok());
    CHECK(read.error() == "link.client_secret is not a CURVE key (40 Z85 characters)");
  }
  SECTION("a public key from another pair") {
    write_link_security(security, bootstrap);
    bootstrap.set("link.server_public", security.client.public_key);
    auto read = read_link_security(bootstrap);
    REQUIRE_FALSE(read.ok());
    CHECK(read.error() == "link.server_public does not belong to link.server_secret");
  }
  SECTION("no link fields at all") {
    auto read = read_link_security(bootstrap);
    REQUIRE_FALSE(read.ok());
    CHECK(read.error() == "link.encrypt must be 1 or 0, not \"\"");
  }
}

TEST_CASE("describing link security shows no secret", "[transport][curve]") {
  LinkSecurity security = LinkSecurity::generate();
  std::string text = security.describe();
  CHECK(text.find(security.server.public_key.substr(0, 8)) != std::string::npos);
  CHECK(text.find(security.server.secret_key.substr(0, 8)) == std::string::npos);
  CHECK(text.find(security.client.secret_key.substr(0, 8)) == std::string::npos);
  CHECK(text.find(security.server.public_key) == std::string::npos); // a prefix only
  CHECK(LinkSecurity::plain().describe() == "plain");
}
