#include <catch2/catch.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "cli/status_view.hpp"

using namespace streamctl::cli;

namespace {

// Every field that `status --json` may carry, for a running job of two nodes.
const char* const full_status = R"({
  "id": "clicks-20261202-ab12", "name": "clicks", "state": "running",
  "started": "2026-12-02T04:00:00Z", "updated": "2026-12-02T04:05:00Z",
  "coordinator_pid": 4242, "last_checkpoint": "/state/ckpt/chk-7",
  "restarts": 1, "checkpoints_completed": 7, "checkpoints_failed": 2,
  "operators": [
    {"name": "gen", "type": "generator", "parallelism": 2, "subtasks": [
      {"index": 0, "host": "localhost", "pid": 1001, "records_in": 0, "records_out": 1234567,
       "bad_records": 0, "bytes_in": 0, "bytes_out": 98765432,
       "records_in_per_s": 0, "records_out_per_s": 5000.5, "records_in_per_s_1m": 0,
       "records_out_per_s_1m": 4900, "busy": 0.2, "idle": 0.1, "backpressured": 0.7,
       "input_queue": 0, "output_queue": 0.95, "watermark_ms": 1764648000000,
       "watermark_lag_ms": 1500, "state_entries": 0, "state_bytes": 0,
       "last_checkpoint": {"id": 7, "duration_ms": 35, "alignment_ms": 0, "bytes": 512}},
      {"index": 1, "host": "localhost", "pid": 1002, "records_in": 0, "records_out": 1200000,
       "bad_records": 0, "busy": 0.25, "idle": 0.05, "backpressured": 0.7,
       "last_checkpoint": {"id": 7, "duration_ms": 40, "alignment_ms": 0, "bytes": 512}}]},
    {"name": "count", "type": "window", "parallelism": 1, "subtasks": [
      {"index": 0, "host": "localhost", "pid": 1003, "records_in": 2434567, "records_out": 3400,
       "bad_records": 12, "records_in_per_s": 10000, "records_out_per_s": 2.5,
       "busy": 0.98, "idle": 0.02, "backpressured": 0, "watermark_lag_ms": 2500,
       "state_entries": 3400, "state_bytes": 1258291,
       "last_checkpoint": {"id": 7, "duration_ms": 1250, "alignment_ms": 800, "bytes": 1258291},
       "latency_ms": {"markers": 120, "p50": 3.5, "p95": 12, "p99": 48, "max": 130}}]}]})";

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

} // namespace

TEST_CASE("status view: every field is read", "[cli]") {
  auto view = parse_status_view(full_status);
  REQUIRE(view.ok());
  CHECK(*view->id == "clicks-20261202-ab12");
  CHECK(*view->state == "running");
  CHECK(*view->coordinator_pid == 4242);
  CHECK(*view->restarts == 1);
  CHECK(*view->checkpoints_completed == 7);
  CHECK(*view->checkpoints_failed == 2);
  CHECK_FALSE(view->failure);
  REQUIRE(view->operators.size() == 2);
  const OperatorView& count = view->operators[1];
  CHECK(count.name == "count");
  CHECK(count.type == "window");
  REQUIRE(count.subtasks.size() == 1);
  const SubtaskView& s = count.subtasks[0];
  CHECK(s.node == "count");
  CHECK(*s.records_in == 2434567);
  CHECK(*s.bad_records == 12);
  CHECK(*s.busy == Approx(0.98));
  CHECK(*s.state_bytes == 1258291);
  CHECK(*s.last_checkpoint.duration_ms == 1250);
  CHECK(*s.last_checkpoint.alignment_ms == 800);
  REQUIRE(s.latency);
  CHECK(*s.latency->p99_ms == 48);
  CHECK(*s.latency->p50_ms == Approx(3.5));
  const SubtaskView& g = view->operators[0].subtasks[0];
  CHECK(*g.watermark_ms == 1764648000000.0);
  CHECK(*g.output_queue == Approx(0.95));
  CHECK(*g.records_out_per_s_1m == 4900);
  CHECK_FALSE(g.latency);
}

TEST_CASE("status view: the text of a running job", "[cli]") {
  auto view = parse_status_view(full_status);
  REQUIRE(view.ok());
  std::string text = format_status(*view);
  INFO(text);
  auto lines = lines_of(text);
  CHECK(lines[0] == "job clicks-20261202-ab12 (clicks): running, started 2026-12-02T04:00:00Z");
  CHECK(lines[1] == "  restarts 1, checkpoints 7 completed, 2 failed");
  CHECK(lines[2] == "  last checkpoint: /state/ckpt/chk-7");
  // The columns: all hosts are localhost (no host column); a bad record and a latency figure
  // bring theirs.
  CHECK(lines[3] ==
        "    #   pid    in   out  bad  in/s  out/s  busy  bkpr  wm lag  state   p99  ckpt");
  CHECK(lines[4] == "  gen (generator) x2");
  CHECK(lines[5] ==
        "    0  1001     0  1.2M    0     0   5.0k   20%   70%    1.5s     0B     -  35ms");
  CHECK(lines[6] ==
        "    1  1002     0  1.2M    0     -      -   25%   70%       -      -     -  40ms");
  CHECK(lines[7] == "  count (window) x1");
  CHECK(lines[8] ==
        "    0  1003  2.4M  3.4k   12   10k    2.5   98%    0%    2.5s  1.2MB  48ms  1.2s");
  CHECK(lines.size() == 9);
  for (const auto& line : lines) CHECK(line.size() <= 100);
}

TEST_CASE("status view: top puts the most backpressured subtask first, ties by busy", "[cli]") {
  auto view = parse_status_view(full_status);
  REQUIRE(view.ok());
  auto rows = subtasks_by_pressure(*view);
  REQUIRE(rows.size() == 3);
  CHECK((rows[0].node == "gen" && *rows[0].index == 1)); // 70%, busier than gen[0]
  CHECK((rows[1].node == "gen" && *rows[1].index == 0));
  CHECK(rows[2].node == "count");
  auto lines = lines_of(format_top(*view));
  REQUIRE(lines.size() == 7);
  CHECK(lines[3].rfind("  node[#]", 0) == 0);
  CHECK(lines[4].rfind("  gen[1] ", 0) == 0);
  CHECK(lines[6].rfind("  count[0] ", 0) == 0);
  for (const auto& line : lines) CHECK(line.size() <= 100);
}

TEST_CASE("status view: a failed job shows its cause", "[cli]") {
  auto view = parse_status_view(
      R"({"id":"j-1","name":"j","state":"failed","started":"T0","last_checkpoint":"",
          "failure":{"node":"parse","task":"src -> parse[1]","message":"division by zero",
                     "time":"2026-12-02T04:10:00Z"},"operators":[]})");
  REQUIRE(view.ok());
  auto lines = lines_of(format_status(*view, " (its coordinator is gone)"));
  REQUIRE(lines.size() == 3);
  CHECK(lines[0] == "job j-1 (j): failed (its coordinator is gone), started T0");
  CHECK(lines[1] == "  last checkpoint: none");
  CHECK(lines[2] == "  failed: division by zero (node parse, task src -> parse[1], at "
                    "2026-12-02T04:10:00Z)");
  // Parts of the cause that are missing are left out.
  view = parse_status_view(R"({"state":"failed","failure":{"message":"lost worker"}})");
  REQUIRE(view.ok());
  CHECK(lines_of(format_status(*view))[2] == "  failed: lost worker");
  view = parse_status_view(R"({"state":"failed","failure":{}})");
  REQUIRE(view.ok());
  CHECK(lines_of(format_status(*view))[2] == "  failed: (no message)");
}

TEST_CASE("status view: missing and mistyped fields show as -", "[cli]") {
  // What a coordinator sends today: counters only.
  auto view = parse_status_view(
      R"({"id":"j-2","name":"j","state":"running","started":"T0","updated":"T1",
          "coordinator_pid":7,"last_checkpoint":"",
          "operators":[{"name":"gen","type":"generator","parallelism":1,"subtasks":[
            {"index":0,"host":"node7","pid":99,"records_in":0,"records_out":12,"bad_records":0}]},
            {"name":"sink","subtasks":[{"records_in":"many","busy":"x","latency_ms":3}]},
            {"name":"empty","type":"file","parallelism":1},
            "not an operator"]})");
  REQUIRE(view.ok());
  REQUIRE(view->operators.size() == 3);
  CHECK_FALSE(view->restarts);
  const SubtaskView& s = view->operators[1].subtasks[0];
  CHECK_FALSE(s.records_in);
  CHECK_FALSE(s.busy);
  CHECK_FALSE(s.latency);
  std::string text = format_status(*view);
  INFO(text);
  auto lines = lines_of(text);
  REQUIRE(lines.size() == 8);
  CHECK(lines[1] == "  last checkpoint: none"); // no restarts line without its figures
  CHECK(lines[2] == "    #  host   pid  in  out  in/s  out/s  busy  bkpr  wm lag  state  ckpt");
  CHECK(lines[3] == "  gen (generator) x1");
  CHECK(lines[4] == "    0  node7   99   0   12     -      -     -     -       -      -     -");
  CHECK(lines[5] == "  sink (-) x-");
  CHECK(lines[6] == "    -  -        -   -    -     -      -     -     -       -      -     -");
  CHECK(lines[7] == "  empty (file) x1");
  // top sorts a subtask without figures last and still draws it.
  auto top = lines_of(format_top(*view));
  REQUIRE(top.size() == 5); // the operator without subtasks has no row
  CHECK(top[3].rfind("  gen[0]", 0) == 0);
  CHECK(top[4].rfind("  sink[-]", 0) == 0);

  // Nothing but an object: every line still drawn.
  view = parse_status_view("{}");
  REQUIRE(view.ok());
  CHECK(format_status(*view) == "job - (-): -, started -\n  last checkpoint: none\n");
  CHECK(format_top(*view) ==
        "job - (-): -, started -\n  last checkpoint: none\n  (no subtask figures)\n");
}

TEST_CASE("status view: malformed JSON is refused with the reason", "[cli]") {
  for (const char* text : {"", "{", "[1,2]", "{\"id\": }", "null", "{\"operators\":[}"}) {
    INFO(text);
    auto view = parse_status_view(text);
    CHECK_FALSE(view.ok());
  }
  auto view = parse_status_view("{\"id\": }");
  REQUIRE_FALSE(view.ok());
  CHECK_THAT(view.error(), Catch::Contains("not JSON") && Catch::Contains("column"));
  view = parse_status_view("[]");
  REQUIRE_FALSE(view.ok());
  CHECK_THAT(view.error(), Catch::Contains("not a JSON object"));
}

TEST_CASE("status view: human units", "[cli]") {
  CHECK(human_count(std::nullopt) == "-");
  CHECK(human_count(0) == "0");
  CHECK(human_count(999) == "999");
  CHECK(human_count(2.5) == "2.5");
  CHECK(human_count(12.4) == "12");
  CHECK(human_count(3400) == "3.4k");
  CHECK(human_count(34000) == "34k");
  CHECK(human_count(999600) == "1.0M");
  CHECK(human_count(12.3e9) == "12G");
  CHECK(human_bytes(512) == "512B");
  CHECK(human_bytes(1258291) == "1.2MB");
  CHECK(human_bytes(1023.9 * 1024) == "1.0MB");
  CHECK(human_duration_ms(350) == "350ms");
  CHECK(human_duration_ms(1250) == "1.2s");
  CHECK(human_duration_ms(45000) == "45s");
  CHECK(human_duration_ms(150000) == "2.5min");
  CHECK(human_duration_ms(3.1 * 3600e3) == "3.1h");
  CHECK(human_duration_ms(2 * 86400e3) == "2.0d");
  CHECK(human_duration_ms(-1500) == "-1.5s");
  CHECK(percent(0.123) == "12%");
  CHECK(percent(1.2) == "100%");
  CHECK(percent(std::nullopt) == "-");
  for (double n : {0.0, 1.0, 9.96, 999.4, 999.6, 1e5, 9.9e5, 1e15, 18446744073709551615.0})
    CHECK(human_count(n).size() <= 6);
}

TEST_CASE("status view: the autoscaler's last decision is one line", "[cli]") {
  const std::string json = R"({"id": "j", "state": "running", "autoscale": {
    "time": "2026-12-02T05:40:01Z", "outcome": "rescaling to slow=2",
    "nodes": [{"node": "slow", "from": 1, "to": 2, "target_in": 800.0, "true_rate": 767.4,
               "required": 1.5}]}})";
  auto view = parse_status_view(json);
  REQUIRE(view);
  REQUIRE(view->autoscale);
  CHECK(*view->autoscale == "2026-12-02T05:40:01Z: slow 1 -> 2 (target in 800/s, true rate "
                            "767/s per instance); rescaling to slow=2");
  CHECK(format_status(*view).find("  autoscale: 2026-12-02T05:40:01Z: slow 1 -> 2") !=
        std::string::npos);

  auto none = parse_status_view(R"({"id": "j", "state": "running"})");
  REQUIRE(none);
  CHECK_FALSE(none->autoscale);
  CHECK(format_status(*none).find("autoscale") == std::string::npos);
}
