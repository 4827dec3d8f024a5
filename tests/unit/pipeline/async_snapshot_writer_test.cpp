// The background snapshot writer (pipeline/runtime/async_snapshot_writer): jobs complete in
// the order submitted into files a SnapshotReader reads back, and a job that cannot be written
// completes with an error instead of stopping the writer.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "pipeline/runtime/async_snapshot_writer.hpp"
#include "state/key_group.hpp"
#include "state/snapshot_format.hpp"
#include "unit/temp_dir.hpp"

using namespace streamctl;
using runtime::AsyncSnapshotWriter;
using runtime::SnapshotJob;
using runtime::SnapshotWritten;
using streamctl::testing::TempDir;
namespace fs = std::filesystem;

namespace {

constexpr std::uint32_t kMaxParallelism = 16;

SnapshotJob make_job(const fs::path& path, std::uint64_t checkpoint_id, int subtask, int parallelism) {
  SnapshotJob job;
  job.checkpoint_id = checkpoint_id;
  job.path = path;
  job.header.job_name = "j";
  job.header.checkpoint_id = checkpoint_id;
  job.header.created_at_ms = 1764446206123;
  job.header.max_parallelism = kMaxParallelism;
  job.header.subtask = static_cast<std::uint32_t>(subtask);
  job.header.parallelism = static_cast<std::uint32_t>(parallelism);
  job.header.key_groups = state::key_group_range(subtask, parallelism, kMaxParallelism);
  job.header.chain_nodes = {"src", "agg"};
  job.segments.push_back({"src", state::SegmentKind::SourcePosition, state::no_key_group,
                          "position-of-" + std::to_string(subtask)});
  for (std::uint32_t kg = job.header.key_groups.first; kg < job.header.key_groups.end; ++kg)
    job.segments.push_back({"agg", state::SegmentKind::Keyed, kg, std::string(100 + kg, static_cast<char>('a' + kg))});
  return job;
}

std::uint64_t raw_size(const SnapshotJob& job) {
  std::uint64_t n = 0;
  for (const auto& s : job.segments) n += s.bytes.size();
  return n;
}

// Polls until `count` jobs have completed or 20 s have passed.
std::vector<SnapshotWritten> wait_for(AsyncSnapshotWriter& writer, std::size_t count) {
  std::vector<SnapshotWritten> done;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (done.size() < count && std::chrono::steady_clock::now() < deadline) {
    for (auto& w : writer.take_completed()) done.push_back(std::move(w));
    if (done.size() < count) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return done;
}

// The file at `path` holds exactly the header and segments of `expected`.
void check_file(const fs::path& path, const SnapshotJob& expected) {
  auto reader = state::SnapshotReader::open(path);
  REQUIRE(reader);
  CHECK(reader->header() == expected.header);
  CHECK(reader->segments().size() == expected.segments.size());
  for (const auto& s : expected.segments) {
    CAPTURE(s.node, s.key_group);
    const state::SegmentInfo* info = reader->find(s.node, s.kind, s.key_group);
    REQUIRE(info != nullptr);
    auto bytes = reader->read_segment(*info);
    REQUIRE(bytes);
    CHECK(*bytes == s.bytes);
  }
}

} // namespace

TEST_CASE("submitted snapshot jobs complete in order into readable files", "[async_snapshot_writer]") {
  TempDir tmp;
  fs::path dir = tmp.path / "job" / "chk-4"; // the coordinator creates it when it triggers
  fs::create_directories(dir);
  SnapshotJob first = make_job(dir / "chain-0-subtask-0.snap", 4, 0, 2);
  SnapshotJob second = make_job(dir / "chain-0-subtask-1.snap", 4, 1, 2);
  // Copies to check against: the writer frees segment bytes as it goes.
  const SnapshotJob first_expected = first;
  const SnapshotJob second_expected = second;

  AsyncSnapshotWriter writer;
  writer.submit(std::move(first));
  writer.submit(std::move(second));
  auto done = wait_for(writer, 2);
  REQUIRE(done.size() == 2);

  CHECK(done[0].file_name == "chain-0-subtask-0.snap");
  CHECK(done[1].file_name == "chain-0-subtask-1.snap");
  for (std::size_t k = 0; k < 2; ++k) {
    CAPTURE(k);
    const SnapshotJob& expected = k == 0 ? first_expected : second_expected;
    CHECK(done[k].error.empty());
    CHECK(done[k].checkpoint_id == 4);
    CHECK(done[k].bytes == fs::file_size(expected.path));
    CHECK(done[k].raw_bytes == raw_size(expected));
    CHECK(done[k].seconds >= 0);
    check_file(expected.path, expected);
  }
  CHECK(writer.take_completed().empty()); // each completion is reported once
}

TEST_CASE("take_completed is empty before anything is submitted", "[async_snapshot_writer]") {
  AsyncSnapshotWriter writer;
  CHECK(writer.take_completed().empty());
}

TEST_CASE("a job whose directory cannot be created completes with an error and the writer goes on",
          "[async_snapshot_writer]") {
  TempDir tmp;
  fs::path plain = tmp.path / "plain";
  {
    std::ofstream out(plain);
    out << "a regular file, not a directory";
  }
  SnapshotJob bad = make_job(plain / "chk-1" / "chain-0-subtask-0.snap", 1, 0, 1);
  fs::create_directories(tmp.path / "chk-1");
  SnapshotJob good = make_job(tmp.path / "chk-1" / "chain-0-subtask-0.snap", 1, 0, 1);
  const SnapshotJob good_expected = good;

  AsyncSnapshotWriter writer;
  writer.submit(std::move(bad));
  writer.submit(std::move(good));
  auto done = wait_for(writer, 2);
  REQUIRE(done.size() == 2);

  CHECK(done[0].checkpoint_id == 1);
  CHECK(done[0].file_name == "chain-0-subtask-0.snap");
  CHECK_FALSE(done[0].error.empty());
  CHECK_THAT(done[0].error, Catch::Contains((plain / "chk-1").string())); // names where it failed
  CHECK(fs::is_regular_file(plain));

  CHECK(done[1].error.empty());
  check_file(good_expected.path, good_expected);
}

// Issue 7, finding 10: the coordinator gives up a checkpoint (a full disk, a timeout) and
// removes its directory while another task's file is still queued here; the writer used to
// create the directory again, and the failed checkpoint left an empty chk-N that nothing
// deleted.
TEST_CASE("a job whose checkpoint directory was removed fails without creating it again",
          "[async_snapshot_writer]") {
  TempDir tmp;
  fs::path dir = tmp.path / "chk-3";
  AsyncSnapshotWriter writer;
  writer.submit(make_job(dir / "chain-0-subtask-1.snap", 3, 1, 2));
  auto done = wait_for(writer, 1);
  REQUIRE(done.size() == 1);
  CHECK_FALSE(done[0].error.empty());
  CHECK_THAT(done[0].error, Catch::Contains(dir.string()));
  CHECK_FALSE(fs::exists(dir));
}

TEST_CASE("a job with an inconsistent header completes with an error and leaves no file",
          "[async_snapshot_writer]") {
  TempDir tmp;
  fs::create_directories(tmp.path / "chk-2");
  SnapshotJob job = make_job(tmp.path / "chk-2" / "bad.snap", 2, 0, 2);
  job.header.subtask = 5; // not below parallelism 2
  AsyncSnapshotWriter writer;
  writer.submit(std::move(job));
  auto done = wait_for(writer, 1);
  REQUIRE(done.size() == 1);
  CHECK(done[0].checkpoint_id == 2);
  CHECK_FALSE(done[0].error.empty());
  CHECK_FALSE(fs::exists(tmp.path / "chk-2" / "bad.snap"));
}

TEST_CASE("destroying the writer with jobs queued neither hangs nor crashes", "[async_snapshot_writer]") {
  TempDir tmp;
  fs::create_directories(tmp.path / "chk-1");
  {
    AsyncSnapshotWriter writer;
    for (int k = 0; k < 8; ++k)
      writer.submit(make_job(tmp.path / "chk-1" / ("f" + std::to_string(k) + ".snap"), 1, 0, 1));
  }
  // Whatever was written is whole: files appear only once durable (no temporary left behind).
  std::size_t files = 0;
  for (const auto& entry : fs::directory_iterator(tmp.path / "chk-1")) {
    CAPTURE(entry.path().string());
    CHECK(entry.path().extension() == ".snap");
    CHECK(state::SnapshotReader::open(entry.path()));
    ++files;
  }
  CHECK(files <= 8);
}
