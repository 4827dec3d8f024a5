#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <sys/wait.h>

#include "pipeline/runtime/prometheus_text.hpp"
#include "unit/temp_dir.hpp"

using namespace streamctl;
using namespace streamctl::runtime;

namespace {

// A generator feeding a sink: the source has a watermark and no checkpoint yet, the sink has
// state, a completed checkpoint and latency markers.
JobMetrics small_job() {
  JobMetrics m;
  m.job_id = "j-1";
  m.job_name = "clicks";
  m.state = "running";
  m.restarts = 1;
  m.checkpoints_completed = 2;
  SubtaskMetrics g;
  g.node = "g";
  g.type = "generator";
  g.host = "localhost";
  g.records_out = 10;
  g.bytes_out = 200;
  g.busy = 0.25;
  g.idle = 0.75;
  g.output_queue = 0.5;
  g.watermark_ms = 1700000000500;
  g.watermark_lag_ms = 1500;
  SubtaskMetrics out;
  out.node = "out";
  out.type = "stdout";
  out.subtask = 1;
  out.parallelism = 2;
  out.host = "localhost";
  out.records_in = 10;
  out.bytes_in = 180;
  out.state_entries = 7;
  out.state_bytes = 512;
  out.last_checkpoint = {.id = 2, .duration_ms = 1500, .alignment_ms = 20, .bytes = 4096, .pause_ms = 7,
                         .raw_bytes = 16384, .stall_ms = 45, .copied_bytes = 8192};
  out.latency = {.markers = 3, .p50_ms = 5, .p95_ms = 12.5, .p99_ms = 20, .max_ms = 30};
  m.subtasks = {g, out};
  return m;
}

std::set<std::string> lines_of(const std::string& text) {
  std::set<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    lines.insert(line);
  return lines;
}

} // namespace

TEST_CASE("prometheus text: exact samples, HELP and TYPE, families without samples left out") {
  auto text = render_prometheus_text(small_job());
  REQUIRE(text.back() == '\n');
  auto lines = lines_of(text);
  const std::string g = R"(job="j-1",job_name="clicks",node="g",subtask="0",host="localhost")";
  const std::string out = R"(job="j-1",job_name="clicks",node="out",subtask="1",host="localhost")";
  for (const std::string& line : {
           std::string("# TYPE streamctl_restarts_total counter"),
           std::string(R"(streamctl_restarts_total{job="j-1",job_name="clicks"} 1)"),
           std::string(R"(streamctl_checkpoints_completed_total{job="j-1",job_name="clicks"} 2)"),
           std::string(R"(streamctl_checkpoints_failed_total{job="j-1",job_name="clicks"} 0)"),
           std::string("# TYPE streamctl_records_out_total counter"),
           "streamctl_records_out_total{" + g + "} 10",
           "streamctl_records_in_total{" + out + "} 10",
           "streamctl_bytes_out_total{" + g + "} 200",
           "streamctl_bytes_in_total{" + out + "} 180",
           std::string("# TYPE streamctl_busy_ratio gauge"),
           "streamctl_busy_ratio{" + g + "} 0.25",
           "streamctl_idle_ratio{" + g + "} 0.75",
           "streamctl_output_queue_ratio{" + g + "} 0.5",
           "streamctl_watermark_seconds{" + g + "} 1700000000.5",
           "streamctl_watermark_lag_seconds{" + g + "} 1.5",
           "streamctl_state_entries{" + out + "} 7",
           "streamctl_state_bytes{" + out + "} 512",
           "streamctl_last_checkpoint_duration_seconds{" + out + "} 1.5",
           "streamctl_last_checkpoint_alignment_seconds{" + out + "} 0.02",
           "streamctl_last_checkpoint_bytes{" + out + "} 4096",
           "streamctl_last_checkpoint_pause_seconds{" + out + "} 0.007",
           "streamctl_last_checkpoint_raw_bytes{" + out + "} 16384",
           "streamctl_last_checkpoint_stall_seconds{" + out + "} 0.045",
           "streamctl_last_checkpoint_copied_bytes{" + out + "} 8192",
           std::string("# TYPE streamctl_latency_seconds summary"),
           "streamctl_latency_seconds{" + out + ",quantile=\"0.5\"} 0.005",
           "streamctl_latency_seconds{" + out + ",quantile=\"0.95\"} 0.0125",
           "streamctl_latency_seconds{" + out + ",quantile=\"0.99\"} 0.02",
           "streamctl_latency_max_seconds{" + out + "} 0.03",
       }) {
    INFO(text);
    CHECK(lines.count(line) == 1);
  }
  // Absent figures have no sample: the sink has no watermark, the source no checkpoint and
  // no latency.
  CHECK(text.find("streamctl_watermark_seconds{" + out) == std::string::npos);
  CHECK(text.find("streamctl_last_checkpoint_bytes{" + g) == std::string::npos);
  CHECK(text.find("streamctl_latency_seconds{" + g) == std::string::npos);
  // Every family once, its HELP just before its TYPE.
  std::size_t helps = 0, types = 0;
  for (const auto& line : lines) {
    helps += line.rfind("# HELP streamctl_", 0) == 0;
    types += line.rfind("# TYPE streamctl_", 0) == 0;
  }
  CHECK(helps == 26);
  CHECK(types == 26);

  // No watermark, checkpoint or latency anywhere: those families go whole.
  auto bare = small_job();
  bare.subtasks[0].watermark_ms.reset();
  bare.subtasks[0].watermark_lag_ms.reset();
  bare.subtasks[1].last_checkpoint = {};
  bare.subtasks[1].latency = {};
  auto bare_text = render_prometheus_text(bare);
  CHECK(bare_text.find("watermark") == std::string::npos);
  CHECK(bare_text.find("last_checkpoint") == std::string::npos);
  CHECK(bare_text.find("latency") == std::string::npos);
}

TEST_CASE("prometheus text: label values escape backslash, quote and newline") {
  CHECK(escape_label_value("plain") == "plain");
  CHECK(escape_label_value("a\\b\"c\nd") == "a\\\\b\\\"c\\nd");
  auto m = small_job();
  m.job_name = "say \"hi\"\\\n";
  m.subtasks[0].host = "h\"1";
  auto text = render_prometheus_text(m);
  CHECK(text.find(R"(job_name="say \"hi\"\\\n")") != std::string::npos);
  CHECK(text.find(R"(host="h\"1")") != std::string::npos);
  // The raw newline never reaches the text: every line is a comment or a sample.
  for (const auto& line : lines_of(text))
    CHECK((line.rfind("# ", 0) == 0 || line.rfind("streamctl_", 0) == 0));
}

TEST_CASE("prometheus text: passes promtool check metrics") {
  const std::filesystem::path promtool = "/usr/bin/promtool";
  if (!std::filesystem::exists(promtool)) {
    WARN("no /usr/bin/promtool (Debian: prometheus): the text is not checked by promtool");
    return;
  }
  testing::TempDir dir;
  auto m = small_job();
  m.job_name = "odd \"name\"\\\n";
  auto file = dir.path / "metrics.txt";
  std::ofstream(file) << render_prometheus_text(m);
  std::string command = promtool.string() + " check metrics < " + file.string() + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string said;
  char buf[512];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, pipe))
    said.append(buf, n);
  int status = ::pclose(pipe);
  INFO("promtool: " << said);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(said.empty()); // a lint problem is printed even where the exit code is 0
}
