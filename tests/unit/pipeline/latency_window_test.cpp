#include <catch2/catch.hpp>

#include "pipeline/runtime/latency_window.hpp"

using namespace streamctl::runtime;

TEST_CASE("latency percentiles are nearest ranks of the last samples", "[latency]") {
  LatencyWindow w;
  CHECK(w.figures().markers == 0);
  CHECK(w.figures().p99_ms == 0);
  for (int k = 1; k <= 100; ++k) w.add(k * 1000); // 1 .. 100 ms
  LatencyFigures f = w.figures();
  CHECK(f.markers == 100);
  CHECK(f.p50_ms == Approx(50));
  CHECK(f.p95_ms == Approx(95));
  CHECK(f.p99_ms == Approx(99));
  CHECK(f.max_ms == Approx(100));
}

TEST_CASE("old samples leave the window; a negative latency (clock skew) counts as 0", "[latency]") {
  LatencyWindow w;
  for (std::size_t k = 0; k < LatencyWindow::kSamples; ++k) w.add(1'000'000); // 1 s
  for (std::size_t k = 0; k < LatencyWindow::kSamples; ++k) w.add(2000);      // 2 ms
  LatencyFigures f = w.figures();
  CHECK(f.markers == 2 * LatencyWindow::kSamples);
  CHECK(f.max_ms == Approx(2));
  w.add(-5000);
  CHECK(w.figures().p50_ms == Approx(2));
  LatencyWindow skew;
  skew.add(-5000);
  CHECK(skew.figures().max_ms == 0);
}
