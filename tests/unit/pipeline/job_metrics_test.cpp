#include <catch2/catch.hpp>

#include "pipeline/runtime/job_metrics.hpp"

using namespace streamctl::runtime;

TEST_CASE("metrics round-trip, and malformed entries are skipped", "[runtime]") {
  std::vector<NodeMetrics> metrics{{"in", 0, 10, 1}, {"ok", 10, 7, 0}};
  auto back = decode_metrics(encode_metrics(metrics));
  REQUIRE(back.size() == 2);
  CHECK(back[0].node == "in");
  CHECK(back[0].records_out == 10);
  CHECK(back[0].bad_records == 1);
  CHECK(back[1].records_in == 10);

  auto partial = decode_metrics("in:1:2:3;broken;x:1:y:0;ok:4:5:6");
  REQUIRE(partial.size() == 2);
  CHECK(partial[1].node == "ok");
  CHECK(decode_metrics("").empty());
}
