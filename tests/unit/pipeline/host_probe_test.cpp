#include <catch2/catch.hpp>

#include <cstdlib>

#include "pipeline/runtime/host_probe.hpp"
#include "pipeline/runtime/worker_bootstrap.hpp"
#include "transport/protocol.hpp"

using namespace streamctl::runtime;

TEST_CASE("a probe reads back as written, with the coordinator's address from SSH_CONNECTION",
          "[host_probe]") {
  ::setenv("SSH_CONNECTION", "10.213.0.1 53422 10.213.0.11 22", 1);
  HostProbe here = probe_this_host();
  ::unsetenv("SSH_CONNECTION");
  CHECK(here.version == streamctl_version());
  CHECK(here.protocol == streamctl::transport::kProtocolVersion);
  CHECK(here.cores >= 1);
  CHECK_FALSE(here.hostname.empty());
  CHECK(here.coordinator_address == "10.213.0.1");
  auto read = parse_probe("Welcome to h2!\n" + format_probe(here) + "later_key=1");
  REQUIRE(read);
  CHECK(read->version == here.version);
  CHECK(read->protocol == here.protocol);
  CHECK(read->cores == here.cores);
  CHECK(read->hostname == here.hostname);
  CHECK(read->coordinator_address == "10.213.0.1");
  CHECK(probe_this_host().coordinator_address.empty());
}

TEST_CASE("output that is not a probe's is refused", "[host_probe]") {
  CHECK_FALSE(parse_probe(""));
  CHECK_FALSE(parse_probe("version=1\nprotocol=1\n"));
  CHECK_FALSE(parse_probe("version=1\nprotocol=x\ncores=2\n"));
  auto bad = parse_probe("streamctl 0.1.0\n");
  REQUIRE_FALSE(bad);
  CHECK_THAT(bad.error(), Catch::Contains("not the output of `streamctl probe`"));
}
