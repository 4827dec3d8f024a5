// The coordinator's cost of rendering /metrics (prometheus_text.hpp), which it pays once a second
// on its own thread: microseconds per render of a job of N subtask rows, every family present.
// Not a pass/fail test.
//
//   prometheus_render_bench [subtask_rows=65]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "pipeline/runtime/prometheus_text.hpp"

using namespace streamctl::runtime;

int main(int argc, char** argv) {
  int rows = argc > 1 ? std::atoi(argv[1]) : 65;
  JobMetrics m;
  m.job_id = "20261202-050000-abcd";
  m.job_name = "bench-scrape";
  for (int k = 0; k < rows; ++k) {
    SubtaskMetrics s;
    s.node = k < rows / 2 ? "g" : "m";
    s.subtask = k;
    s.host = "localhost";
    s.records_in = s.records_out = 123456789ull * static_cast<unsigned>(k + 1);
    s.bytes_in = s.bytes_out = 98765432100ull;
    s.busy = 0.125;
    s.idle = 0.8125;
    s.backpressured = 0.0625;
    s.watermark_ms = 1764651600123;
    s.watermark_lag_ms = 1234;
    s.state_entries = 1000;
    s.state_bytes = 65536;
    s.last_checkpoint = {.id = 7, .duration_ms = 250, .alignment_ms = 3, .bytes = 4096};
    s.latency = {.markers = 10, .p50_ms = 1.5, .p95_ms = 4.25, .p99_ms = 9, .max_ms = 12};
    m.subtasks.push_back(s);
  }
  using Clock = std::chrono::steady_clock;
  std::size_t bytes = 0;
  double best = 1e9;
  for (int slice = 0; slice < 5; ++slice) {
    auto t0 = Clock::now();
    int n = 0;
    while (Clock::now() - t0 < std::chrono::milliseconds(200)) {
      bytes = render_prometheus_text(m).size();
      ++n;
    }
    best = std::min(best, std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / n);
  }
  std::printf("render (%d subtask rows, every family, %zu bytes): %.1f us (best of 5 slices)\n",
              rows, bytes, best);
}
