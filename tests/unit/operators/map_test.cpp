#include <catch2/catch.hpp>

#include "harness.hpp"

using streamctl::testing::Harness;
using streamctl::testing::single_operator_pipeline;

TEST_CASE("map applies set, then rename, then remove", "[operators][map]") {
  Harness h(single_operator_pipeline(R"(type = "map"
set = { total = "a + b", a = "a * 10" }
rename = { b = "bee" }
remove = ["c"])"));
  auto out = h.run_operator("op", {R"({"a":1,"b":2,"c":3})"});
  // Every set expression sees the input record: total uses a = 1, not 10.
  REQUIRE(out == std::vector<std::string>{R"({"a":10,"bee":2,"total":3})"});
}

TEST_CASE("map keeps strings made by functions alive with the output batch", "[operators][map]") {
  Harness h(single_operator_pipeline("type = \"map\"\nset = { shout = \"upper(concat(user, '!'))\" }"));
  std::vector<std::string> inputs;
  for (int k = 0; k < 3000; ++k) inputs.push_back("{\"user\":\"user" + std::to_string(k) + "\"}");
  auto out = h.run_operator("op", inputs, 512);
  REQUIRE(out.size() == 3000);
  CHECK(out[2999] == R"({"user":"user2999","shout":"USER2999!"})");
}

TEST_CASE("map sends a record whose expression fails to on_error and goes on", "[operators][map]") {
  Harness h(single_operator_pipeline("type = \"map\"\nset = { half = \"n / d\" }"));
  auto out = h.run_operator("op", {R"({"n":4,"d":0})", R"({"n":4,"d":2})"});
  REQUIRE(out == std::vector<std::string>{R"({"n":4,"d":2,"half":2})"});
  REQUIRE(h.errors.errors.size() == 1);
  CHECK(h.errors.errors[0].raw == R"({"n":4,"d":0})");
}

TEST_CASE("map renames onto an existing field by replacing it", "[operators][map]") {
  Harness h(single_operator_pipeline("type = \"map\"\nrename = { a = \"b\" }"));
  auto out = h.run_operator("op", {R"({"a":1,"b":2})", R"({"b":3})"});
  REQUIRE(out == std::vector<std::string>{R"({"b":1})", R"({"b":3})"});
}
