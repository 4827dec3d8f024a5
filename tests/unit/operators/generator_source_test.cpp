#include <catch2/catch.hpp>

#include <algorithm>

#include "harness.hpp"

using streamctl::testing::Harness;

namespace {
std::string generator_pipeline(const std::string& keys) {
  return "name = \"t\"\n[sources.gen]\ntype = \"generator\"\n" + keys +
         "\n[sinks.out]\ntype = \"stdout\"\ninputs = [\"gen\"]\n";
}
} // namespace

TEST_CASE("counter emits seq from 0 and ts = start_time + seq * interval", "[operators][generator]") {
  Harness h(generator_pipeline("count = 3\nstart_time = 1000\ninterval = \"1s\""));
  auto out = h.run_source("gen");
  REQUIRE(out == std::vector<std::string>{R"({"seq":0,"ts":1000})", R"({"seq":1,"ts":2000})",
                                          R"({"seq":2,"ts":3000})"});
}

TEST_CASE("the generator's records do not depend on the parallelism", "[operators][generator]") {
  Harness h(generator_pipeline("profile = \"clicks\"\ncount = 1000\nseed = 5"));
  auto one = h.run_source("gen", 0, 1, 100);
  std::vector<std::string> three;
  for (int s = 0; s < 3; ++s) {
    auto part = h.run_source("gen", s, 3, 64);
    three.insert(three.end(), part.begin(), part.end());
  }
  std::sort(one.begin(), one.end());
  std::sort(three.begin(), three.end());
  REQUIRE(one.size() == 1000);
  CHECK(one == three);
}

TEST_CASE("clicks are a pure function of the seed", "[operators][generator]") {
  Harness a(generator_pipeline("profile = \"clicks\"\ncount = 50\nseed = 1"));
  Harness b(generator_pipeline("profile = \"clicks\"\ncount = 50\nseed = 2"));
  CHECK(a.run_source("gen") == a.run_source("gen"));
  CHECK(a.run_source("gen") != b.run_source("gen"));
  CHECK_THAT(a.run_source("gen")[0], Catch::Contains("\"user\":\"u"));
}
