#include <catch2/catch.hpp>

#include "pipeline/runtime/watermark_tracker.hpp"

using streamctl::runtime::WatermarkTracker;

TEST_CASE("the task watermark is the minimum over its channels", "[watermark]") {
  WatermarkTracker t(2);
  CHECK_FALSE(t.on_watermark(1, 100)); // channel 2 has not spoken: still -infinity
  CHECK(t.on_watermark(2, 50) == 50);
  CHECK_FALSE(t.on_watermark(2, 40)); // a channel's watermark never goes back
  CHECK(t.on_watermark(2, 150) == 100);
  CHECK(t.current() == 100);
}

TEST_CASE("idle channels are skipped until they send data or a watermark", "[watermark]") {
  WatermarkTracker t(2);
  CHECK_FALSE(t.on_watermark(1, 10));
  CHECK(t.on_watermark(2, 5) == 5);
  CHECK(t.on_idle(2) == 10);          // channel 2 idle: channel 1 alone decides
  CHECK(t.on_watermark(1, 30) == 30);
  CHECK_FALSE(t.on_data(2));          // active again at 5: the watermark does not go back
  CHECK(t.current() == 30);
  CHECK_FALSE(t.on_watermark(1, 40)); // ... but channel 2 now holds it at 5
  CHECK(t.on_watermark(2, 35) == 35);
}

TEST_CASE("ended channels count as +infinity; all ended gives +infinity", "[watermark]") {
  WatermarkTracker t(3);
  t.on_watermark(1, 7);
  t.on_end(2);
  CHECK(t.on_watermark(3, 9) == 7);
  CHECK(t.on_end(1) == 9);
  CHECK(t.on_end(3) == INT64_MAX);
}

TEST_CASE("all channels idle leaves the watermark where it is", "[watermark]") {
  WatermarkTracker t(2);
  t.on_watermark(1, 3);
  CHECK(t.on_watermark(2, 4) == 3);
  CHECK(t.on_idle(1) == 4);
  CHECK_FALSE(t.on_idle(2));
  CHECK(t.current() == 4);
}
