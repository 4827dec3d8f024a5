#include <catch2/catch.hpp>

#include "pipeline/runtime/worker_bootstrap.hpp"

using namespace streamctl::runtime;

// A worker on another host expands the pipeline's ${NAME} with the coordinator's values: they
// must survive the bootstrap exactly, '=' and newlines in a value included.
TEST_CASE("the values of the pipeline's variables travel in the bootstrap", "[bootstrap][env]") {
  WorkerBootstrap b;
  b.pipeline = "path = \"${IN}\"\n";
  b.variables = {{"IN", "/data/in=1\nx"}, {"EMPTY", ""}};
  std::string encoded = encode_bootstrap(b);
  auto body = encoded.substr(encoded.find('\n', encoded.find('\n') + 1) + 1);
  auto decoded = decode_bootstrap_body(body);
  REQUIRE(decoded);
  CHECK(decoded->variables == b.variables);
  CHECK(decoded->pipeline == b.pipeline);
  CHECK(decoded->extra.empty());
}
