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

// map evaluates each `set` over the whole batch (Expression::eval_batch): a record that fails
// is reported with the error of the first `set` that fails for it, and the records around it,
// including later failing ones, go on in order.
TEST_CASE("map over a batch reports each failing record with its first failing set",
          "[operators][map]") {
  Harness h(single_operator_pipeline(
      "type = \"map\"\nset = { q = \"n / d\", r = \"n * s\" }"));
  auto out = h.run_operator("op", {R"({"n":4,"d":2,"s":1})", R"({"n":4,"d":0,"s":"x"})",
                                   R"({"n":6,"d":3,"s":2})", R"({"n":1,"d":1,"s":"y"})",
                                   R"({"n":9,"d":9,"s":3})"});
  REQUIRE(out == std::vector<std::string>{R"({"n":4,"d":2,"s":1,"q":2,"r":4})",
                                          R"({"n":6,"d":3,"s":2,"q":2,"r":12})",
                                          R"({"n":9,"d":9,"s":3,"q":1,"r":27})"});
  REQUIRE(h.errors.errors.size() == 2);
  CHECK(h.errors.errors[0].raw == R"({"n":4,"d":0,"s":"x"})");
  CHECK(h.errors.errors[0].reason.find("division by zero") != std::string::npos);
  CHECK(h.errors.errors[1].raw == R"({"n":1,"d":1,"s":"y"})");
  CHECK(h.errors.errors[1].reason.find("expected a number, got string") != std::string::npos);
}

// A map of `remove` alone takes its own path (one pass, a table of removed names): every
// record keeps its other fields in order, whether the removed ones come first, in the middle,
// last, all or none; a name the input never had (interned after the map was built) stays.
TEST_CASE("map of remove alone drops those fields wherever they are", "[operators][map]") {
  Harness h(single_operator_pipeline("type = \"map\"\nremove = [\"b\", \"d\"]"));
  auto out = h.run_operator("op", {R"({"a":1,"b":2,"c":3})", R"({"b":1,"a":2})", R"({"a":1,"d":2})",
                                   R"({"b":1,"d":2})", R"({"a":1,"c":2})", R"({"zz_new":1,"d":[2],"b":{"x":3},"a":4})"});
  REQUIRE(out == std::vector<std::string>{R"({"a":1,"c":3})", R"({"a":2})", R"({"a":1})", R"({})",
                                          R"({"a":1,"c":2})", R"({"zz_new":1,"a":4})"});
}
