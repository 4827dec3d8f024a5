#include <catch2/catch.hpp>

#include "harness.hpp"

using streamctl::testing::Harness;
using streamctl::testing::single_operator_pipeline;

TEST_CASE("flat_map explode makes one record per array element", "[operators][flat_map]") {
  Harness h(single_operator_pipeline("type = \"flat_map\"\nexplode = \"tags\""));
  auto out = h.run_operator("op", {R"({"id":1,"tags":["a","b"]})", R"({"id":2,"tags":[]})", R"({"id":3})",
                                   R"({"id":4,"tags":null})"});
  REQUIRE(out == std::vector<std::string>{R"({"id":1,"tags":"a"})", R"({"id":1,"tags":"b"})"});
  CHECK(h.errors.errors.empty());
}

TEST_CASE("flat_map explode of a non-array is a bad record", "[operators][flat_map]") {
  Harness h(single_operator_pipeline("type = \"flat_map\"\nexplode = \"tags\""));
  auto out = h.run_operator("op", {R"({"tags":"a"})"});
  CHECK(out.empty());
  REQUIRE(h.errors.errors.size() == 1);
  CHECK_THAT(h.errors.errors[0].reason, Catch::Contains("not an array"));
}

TEST_CASE("flat_map split makes one record per non-empty piece", "[operators][flat_map]") {
  Harness h(single_operator_pipeline("type = \"flat_map\"\nsplit = { field = \"text\", by = \" \", as = \"word\" }"));
  auto out = h.run_operator("op", {R"({"n":1,"text":" to  be "})", R"({"n":2,"text":""})"});
  REQUIRE(out == std::vector<std::string>{R"({"n":1,"word":"to"})", R"({"n":1,"word":"be"})"});
}

TEST_CASE("flat_map needs exactly one of explode and split", "[operators][flat_map]") {
  CHECK_THROWS_WITH(Harness(single_operator_pipeline("type = \"flat_map\"")),
                    Catch::Contains("exactly one of 'explode' and 'split'"));
}
