#include <catch2/catch.hpp>

#include "harness.hpp"

using streamctl::testing::Harness;
using streamctl::testing::single_operator_pipeline;

TEST_CASE("reduce emits the updated row, key fields first, on every input", "[operators][reduce]") {
  Harness h(single_operator_pipeline(
      "type = \"reduce\"\nkey = [\"user\"]\naggregates = { n = \"count()\", total = \"sum(bytes)\" }"));
  auto out = h.run_operator("op", {R"({"user":"a","bytes":1})", R"({"user":"b","bytes":5})",
                                   R"({"bytes":7,"user":"a"})"});
  REQUIRE(out == std::vector<std::string>{R"({"user":"a","n":1,"total":1})", R"({"user":"b","n":1,"total":5})",
                                          R"({"user":"a","n":2,"total":8})"});
}

TEST_CASE("reduce treats a missing key field as the null key", "[operators][reduce]") {
  Harness h(single_operator_pipeline("type = \"reduce\"\nkey = [\"user\"]\naggregates = { n = \"count()\" }"));
  auto out = h.run_operator("op", {R"({"x":1})", R"({"user":null})", R"({"user":"a"})"});
  REQUIRE(out == std::vector<std::string>{R"({"user":null,"n":1})", R"({"user":null,"n":2})",
                                          R"({"user":"a","n":1})"});
}

TEST_CASE("reduce keys on several fields, and 2 and 2.0 are one key", "[operators][reduce]") {
  Harness h(single_operator_pipeline(
      "type = \"reduce\"\nkey = [\"a\", \"b\"]\naggregates = { n = \"count()\" }"));
  auto out = h.run_operator("op", {R"({"a":2,"b":"x"})", R"({"a":2.0,"b":"x"})", R"({"a":2,"b":"y"})"});
  CHECK(out[1] == R"({"a":2.0,"b":"x","n":2})");
  CHECK(out[2] == R"({"a":2,"b":"y","n":1})");
}

TEST_CASE("an aggregate over a wrong type is a bad record and changes nothing", "[operators][reduce]") {
  Harness h(single_operator_pipeline(
      "type = \"reduce\"\nkey = [\"k\"]\naggregates = { s = \"sum(v)\", n = \"count()\" }"));
  auto out = h.run_operator("op", {R"({"k":1,"v":"ten"})", R"({"k":1,"v":3})"});
  REQUIRE(out == std::vector<std::string>{R"({"k":1,"s":3,"n":1})"});
  REQUIRE(h.errors.errors.size() == 1);
  CHECK_THAT(h.errors.errors[0].reason, Catch::Contains("expected a number"));
}

TEST_CASE("reduce rejects an unknown aggregate with its position", "[operators][reduce]") {
  CHECK_THROWS_WITH(Harness(single_operator_pipeline(
                        "type = \"reduce\"\nkey = [\"k\"]\naggregates = { s = \"sm(v)\" }")),
                    Catch::Contains("did you mean 'sum'"));
}

TEST_CASE("a key entry may be an expression, named after its text in the output row", "[operators][reduce][key]") {
  Harness h(single_operator_pipeline(
      "type = \"reduce\"\nkey = [\"lower(user)\", \"seq % 2\"]\naggregates = { n = \"count()\" }"));
  auto out = h.run_operator("op", {R"j({"user":"A","seq":1})j", R"j({"user":"a","seq":3})j", R"j({"user":"a","seq":2})j"});
  REQUIRE(out == std::vector<std::string>{R"j({"lower(user)":"a","seq % 2":1,"n":1})j",
                                          R"j({"lower(user)":"a","seq % 2":1,"n":2})j",
                                          R"j({"lower(user)":"a","seq % 2":0,"n":1})j"});
}

TEST_CASE("a key entry that names a nested or an odd field reads that field", "[operators][reduce][key]") {
  Harness h(single_operator_pipeline(
      "type = \"reduce\"\nkey = [\"geo.city\", \"`odd name`\"]\naggregates = { n = \"count()\" }"));
  auto out = h.run_operator("op", {R"j({"geo":{"city":"x"},"odd name":1})j", R"j({"geo":{"city":"x"},"odd name":1})j",
                                   R"j({"odd name":1})j"});
  REQUIRE(out == std::vector<std::string>{R"j({"geo.city":"x","odd name":1,"n":1})j",
                                          R"j({"geo.city":"x","odd name":1,"n":2})j",
                                          R"j({"geo.city":null,"odd name":1,"n":1})j"});
}

TEST_CASE("a key expression that fails on a record makes it a bad record", "[operators][reduce][key]") {
  Harness h(single_operator_pipeline("type = \"reduce\"\nkey = [\"to_int(v)\"]\naggregates = { n = \"count()\" }"));
  auto out = h.run_operator("op", {R"j({"v":"7"})j", R"j({"v":"seven"})j", R"j({"v":"7"})j"});
  REQUIRE(out == std::vector<std::string>{R"j({"to_int(v)":7,"n":1})j", R"j({"to_int(v)":7,"n":2})j"});
  REQUIRE(h.errors.errors.size() == 1);
  CHECK_THAT(h.errors.errors[0].reason, Catch::Contains("seven"));
}

TEST_CASE("a key entry that is not an expression is refused with its position", "[operators][reduce][key]") {
  CHECK_THROWS_WITH(Harness(single_operator_pipeline(
                        "type = \"reduce\"\nkey = [\"lower(user\"]\naggregates = { n = \"count()\" }")),
                    Catch::Contains("key 'lower(user' is not a field name or an expression"));
}
