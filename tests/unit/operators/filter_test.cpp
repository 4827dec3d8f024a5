#include <catch2/catch.hpp>

#include "harness.hpp"

using streamctl::testing::Harness;
using streamctl::testing::single_operator_pipeline;

TEST_CASE("filter keeps records whose predicate is true, in order", "[operators][filter]") {
  Harness h(single_operator_pipeline("type = \"filter\"\nwhere = \"status == 200 && bytes > 10\""));
  auto out = h.run_operator("op", {R"({"status":200,"bytes":11})", R"({"status":404,"bytes":50})",
                                   R"({"status":200,"bytes":5})", R"({"status":200,"bytes":99,"x":"y"})"});
  REQUIRE(out == std::vector<std::string>{R"({"status":200,"bytes":11})", R"({"status":200,"bytes":99,"x":"y"})"});
  CHECK(h.errors.errors.empty());
}

TEST_CASE("filter treats null and missing fields as false, without an error", "[operators][filter]") {
  Harness h(single_operator_pipeline("type = \"filter\"\nwhere = \"bytes > 10\""));
  auto out = h.run_operator("op", {R"({"bytes":null})", R"({"other":1})", R"({"bytes":20})"});
  REQUIRE(out == std::vector<std::string>{R"({"bytes":20})"});
  CHECK(h.errors.errors.empty());
}

TEST_CASE("filter hands a type error to on_error with the record as JSON", "[operators][filter]") {
  Harness h(single_operator_pipeline("type = \"filter\"\nwhere = \"bytes > 10\""));
  auto out = h.run_operator("op", {R"({"bytes":"many"})", R"({"bytes":11})"});
  REQUIRE(out == std::vector<std::string>{R"({"bytes":11})"});
  REQUIRE(h.errors.errors.size() == 1);
  CHECK(h.errors.errors[0].raw == R"({"bytes":"many"})");
  CHECK_FALSE(h.errors.errors[0].reason.empty());
}

TEST_CASE("filter output does not depend on the batch size", "[operators][filter]") {
  std::vector<std::string> inputs;
  for (int k = 0; k < 1000; ++k) inputs.push_back("{\"n\":" + std::to_string(k) + "}");
  Harness h(single_operator_pipeline("type = \"filter\"\nwhere = \"n % 7 == 3\""));
  auto whole = h.run_operator("op", inputs, 1024);
  for (std::size_t batch : {1, 3, 64, 999}) CHECK(h.run_operator("op", inputs, batch) == whole);
  CHECK(whole.size() == 143);
}

// filter evaluates `where` over the whole batch (Expression::eval_batch): each failing record
// and each non-boolean result is reported, and the records after it are still filtered.
TEST_CASE("filter over a batch reports every bad record and keeps filtering",
          "[operators][filter]") {
  Harness h(single_operator_pipeline("type = \"filter\"\nwhere = \"if(k == 0, 5, bytes > 10)\""));
  auto out = h.run_operator("op", {R"({"k":1,"bytes":"many"})", R"({"k":1,"bytes":11})",
                                   R"({"k":0,"bytes":50})", R"({"k":1,"bytes":2})",
                                   R"({"k":1,"bytes":"lots"})", R"({"k":1,"bytes":12})"});
  REQUIRE(out == std::vector<std::string>{R"({"k":1,"bytes":11})", R"({"k":1,"bytes":12})"});
  REQUIRE(h.errors.errors.size() == 3);
  CHECK(h.errors.errors[0].raw == R"({"k":1,"bytes":"many"})");
  CHECK(h.errors.errors[1].raw == R"({"k":0,"bytes":50})");
  CHECK(h.errors.errors[1].reason == "where expression must be boolean, got int");
  CHECK(h.errors.errors[2].raw == R"({"k":1,"bytes":"lots"})");
}
