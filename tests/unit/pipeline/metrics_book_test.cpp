#include <catch2/catch.hpp>

#include "operators/registry.hpp"
#include "pipeline/runtime/checkpoint_metadata.hpp"
#include "pipeline/runtime/job_loader.hpp"
#include "pipeline/runtime/metrics_book.hpp"
#include "unit/temp_dir.hpp"

#include <spdlog/sinks/null_sink.h>

using namespace streamctl;
using namespace streamctl::runtime;
using namespace std::chrono_literals;

namespace {

LoadedJob load(int parallelism) {
  operators::Registry registry;
  operators::register_builtin_types(registry);
  std::string text = "name = \"p\"\nparallelism = " + std::to_string(parallelism) + R"(
[sources.g]
type = "generator"
[operators.a]
type = "filter"
inputs = ["g"]
where = "true"
[sinks.out]
type = "stdout"
inputs = ["a"]
)";
  return load_job_text(text, "p.toml", std::filesystem::current_path(), {}, registry);
}

// The tasks of an attempt of `job`, as WorkerPool::start makes them, with no processes.
std::vector<TaskRuntime> tasks_of(const LoadedJob& job) {
  std::vector<TaskRuntime> tasks(job.plan.tasks.size());
  for (std::size_t k = 0; k < tasks.size(); ++k) tasks[k].task = &job.plan.tasks[k];
  return tasks;
}

TaskLoad load_at(std::uint64_t busy, std::uint64_t idle, std::uint64_t backpressured) {
  TaskLoad l;
  l.busy_ms = busy;
  l.idle_ms = idle;
  l.backpressured_ms = backpressured;
  return l;
}

const SubtaskMetrics& row(const JobMetrics& m, const std::string& node, int subtask) {
  for (const auto& s : m.subtasks)
    if (s.node == node && s.subtask == subtask) return s;
  FAIL("no row for " << node << "[" << subtask << "]");
  throw;
}

spdlog::logger quiet() { return spdlog::logger("test", std::make_shared<spdlog::sinks::null_sink_mt>()); }

} // namespace

TEST_CASE("rates and time fractions come from the last two reports", "[metrics_book]") {
  auto job = load(1);
  auto tasks = tasks_of(job);
  REQUIRE(tasks.size() == 1); // g -> a -> out, fused
  const auto t0 = Clock::now();
  tasks[0].record_report(t0, {{"g", 0, 1000, 0}, {"a", 1000, 500, 0}}, load_at(100, 800, 100));
  tasks[0].record_report(t0 + 2s, {{"g", 0, 5000, 0}, {"a", 5000, 2500, 2}}, load_at(1100, 1400, 500));
  MetricsBook book;
  JobMetrics m = book.view(job, tasks, JobFacts{"p-1", "running", 0, 0, 0}, t0 + 2s, 0);
  const SubtaskMetrics& g = row(m, "g", 0);
  CHECK(g.records_out == 5000);
  CHECK(g.records_out_per_s == Approx(2000.0));
  const SubtaskMetrics& a = row(m, "a", 0);
  CHECK(a.records_in_per_s == Approx(2000.0));
  CHECK(a.records_out_per_s == Approx(1000.0));
  CHECK(a.bad_records == 2);
  // 2000 ms between the reports: 1000 busy, 600 idle, 400 backpressured.
  CHECK(a.busy == Approx(0.5));
  CHECK(a.idle == Approx(0.3));
  CHECK(a.backpressured == Approx(0.2));
  CHECK(row(m, "out", 0).records_in == 0); // not in the report: zeros, but a row
  CHECK(m.job_id == "p-1");
}

TEST_CASE("a watermark shows with its lag; none before the first or at the end", "[metrics_book]") {
  auto job = load(1);
  auto tasks = tasks_of(job);
  MetricsBook book;
  TaskLoad l;
  l.watermark = 9000;
  tasks[0].record_report(Clock::now(), {}, l);
  JobMetrics m = book.view(job, tasks, {}, Clock::now(), 10000);
  REQUIRE(row(m, "a", 0).watermark_lag_ms);
  CHECK(*row(m, "a", 0).watermark_lag_ms == 1000);
  l.watermark = INT64_MAX; // end of input
  tasks[0].record_report(Clock::now(), {}, l);
  CHECK_FALSE(book.view(job, tasks, {}, Clock::now(), 10000).subtasks[0].watermark_ms);
  CHECK_FALSE(row(book.view(job, tasks, {}, Clock::now(), 10000), "out", 0).watermark_ms);
}

TEST_CASE("counters carry on from the restored checkpoint of the same job, at any parallelism", "[metrics_book]") {
  testing::TempDir tmp;
  CheckpointMetadata meta;
  meta.job_name = "p";
  meta.job_id = "p-1";
  meta.checkpoint_id = 3;
  meta.max_parallelism = 128;
  // Written at parallelism 2: the source chain's two subtasks, and the sink.
  for (int s = 0; s < 2; ++s) {
    CheckpointTaskFile f{task_snapshot_file(0, s), {"g", "a"}, s, 2, 10};
    f.counts = encode_metrics({{"g", 0, 100u * (s + 1), 0}, {"a", 100u * (s + 1), 50, 1}});
    meta.tasks.push_back(f);
  }
  CheckpointTaskFile sink{task_snapshot_file(1, 0), {"out"}, 0, 1, 10};
  sink.counts = encode_metrics({{"out", 100, 0, 0}});
  meta.tasks.push_back(sink);
  REQUIRE(write_metadata(tmp.path, meta));
  auto log = quiet();

  SECTION("restart at the same parallelism: each subtask its own") {
    auto job = load(2);
    auto tasks = tasks_of(job);
    MetricsBook book;
    book.begin_attempt(job, tmp.path, "p-1", log);
    // The new attempt has read 7 more records on subtask 1.
    for (auto& t : tasks)
      if (t.task->chain == 0 && t.task->subtask == 1) t.record_report(Clock::now(), {{"g", 0, 7, 0}, {"a", 7, 7, 0}}, {});
    JobMetrics m = book.view(job, tasks, {}, Clock::now(), 0);
    CHECK(row(m, "g", 0).records_out == 100);
    CHECK(row(m, "g", 1).records_out == 207);
    CHECK(row(m, "a", 1).bad_records == 1);
    CHECK(row(m, "out", 0).records_in == 100);
    auto totals = book.totals(job, tasks);
    std::uint64_t read = 0;
    for (const auto& task : totals)
      for (const auto& n : task)
        if (n.node == "g") read += n.records_out;
    CHECK(read == 307);
    // The next checkpoint keeps job totals, so that a second restart carries on from them
    // (a run once lost what the first attempt had counted).
    auto kept = decode_metrics(book.checkpoint_counts(1, encode_metrics({{"g", 0, 7, 0}, {"a", 7, 7, 0}})));
    REQUIRE(kept.size() == 2);
    CHECK(kept[0].records_out == 207);
    CHECK(kept[1].records_in == 207);
    CHECK(kept[1].bad_records == 1);
  }
  SECTION("rescaled to 1: the node's total is kept") {
    auto job = load(1);
    auto tasks = tasks_of(job);
    MetricsBook book;
    book.begin_attempt(job, tmp.path, "p-1", log);
    JobMetrics m = book.view(job, tasks, {}, Clock::now(), 0);
    CHECK(row(m, "g", 0).records_out == 300);
    CHECK(row(m, "a", 0).bad_records == 2);
  }
  SECTION("another run's checkpoint (--resume): each run counts its own") {
    auto job = load(2);
    auto tasks = tasks_of(job);
    MetricsBook book;
    book.begin_attempt(job, tmp.path, "p-2", log);
    CHECK(row(book.view(job, tasks, {}, Clock::now(), 0), "g", 1).records_out == 0);
  }
  SECTION("a new attempt from nothing forgets what was carried") {
    auto job = load(2);
    auto tasks = tasks_of(job);
    MetricsBook book;
    book.begin_attempt(job, tmp.path, "p-1", log);
    book.begin_attempt(job, {}, "p-1", log);
    CHECK(row(book.view(job, tasks, {}, Clock::now(), 0), "g", 1).records_out == 0);
  }
}

TEST_CASE("state figures round-trip, and reports of older workers still decode", "[metrics_book]") {
  std::vector<NodeMetrics> metrics{{"w", 10, 2, 0, 5, 4096}};
  auto back = decode_metrics(encode_metrics(metrics));
  REQUIRE(back.size() == 1);
  CHECK(back[0].state_entries == 5);
  CHECK(back[0].state_bytes == 4096);
  auto old = decode_metrics("w:1:2:3");
  REQUIRE(old.size() == 1);
  CHECK(old[0].state_entries == 0);
  CHECK(decode_metrics("w:1:2:3:x:1").empty()); // a damaged state figure drops the entry
}

TEST_CASE("latency figures round-trip in microseconds; malformed entries are skipped", "[metrics_book]") {
  LatencyFigures f;
  f.markers = 12;
  f.p50_ms = 1.5;
  f.p95_ms = 20.25;
  f.p99_ms = 30;
  f.max_ms = 31.001;
  auto back = decode_latency(encode_latency({{"w", f}}));
  REQUIRE(back.size() == 1);
  CHECK(back[0].first == "w");
  CHECK(back[0].second.markers == 12);
  CHECK(back[0].second.p95_ms == Approx(20.25));
  CHECK(back[0].second.max_ms == Approx(31.001));
  auto partial = decode_latency("a:1:2:3:4:5;b:1:2;c:1:2:3:4:x;:1:2:3:4:5;d:1:2:3:4:5:6;e:9:1:1:1:1");
  REQUIRE(partial.size() == 2);
  CHECK(partial[0].first == "a");
  CHECK(partial[1].first == "e");
  CHECK(decode_latency("").empty());
}

TEST_CASE("a task's latency reaches its nodes' rows", "[metrics_book]") {
  auto job = load(1);
  auto tasks = tasks_of(job);
  LatencyFigures f;
  f.markers = 3;
  f.p99_ms = 7;
  tasks[0].latency = {{"a", f}};
  MetricsBook book;
  JobMetrics m = book.view(job, tasks, {}, Clock::now(), 0);
  CHECK(row(m, "a", 0).latency.markers == 3);
  CHECK(row(m, "a", 0).latency.p99_ms == Approx(7));
  CHECK(row(m, "g", 0).latency.markers == 0);
}
