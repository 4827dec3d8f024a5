// Snapshots written by a child process ([checkpoint] snapshot = "fork",
// pipeline/runtime/forked_snapshot): the file holds what the child computed from its copy of
// the parent's memory at the fork (not what the parent changed afterwards), the child keeps
// none of the parent's descriptors, and a child that fails, throws or is killed fails the
// snapshot with a reason instead of hanging or reporting success.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "pipeline/runtime/async_snapshot_writer.hpp"
#include "pipeline/runtime/forked_snapshot.hpp"
#include "state/key_group.hpp"
#include "state/snapshot_format.hpp"
#include "unit/temp_dir.hpp"

using namespace streamctl;
using runtime::AsyncSnapshotWriter;
using runtime::ForkedSnapshot;
using runtime::SnapshotJob;
using runtime::SnapshotSegment;
using runtime::SnapshotWritten;
using streamctl::testing::TempDir;
namespace fs = std::filesystem;

namespace {

SnapshotJob make_job(const fs::path& path) {
  SnapshotJob job;
  job.checkpoint_id = 7;
  job.path = path;
  job.header.job_name = "j";
  job.header.checkpoint_id = 7;
  job.header.created_at_ms = 1764446206123;
  job.header.max_parallelism = 16;
  job.header.subtask = 0;
  job.header.parallelism = 1;
  job.header.key_groups = state::key_group_range(0, 1, 16);
  job.header.chain_nodes = {"agg"};
  return job;
}

std::string segment_of(const fs::path& path, std::uint32_t key_group) {
  auto reader = state::SnapshotReader::open(path);
  REQUIRE(reader);
  const state::SegmentInfo* info = reader->find("agg", state::SegmentKind::Keyed, key_group);
  REQUIRE(info != nullptr);
  auto bytes = reader->read_segment(*info);
  REQUIRE(bytes);
  return *bytes;
}

// Polls the writer until `count` jobs have completed or 20 s have passed.
std::vector<SnapshotWritten> wait_for_completed(AsyncSnapshotWriter& writer, std::size_t count) {
  std::vector<SnapshotWritten> done;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (done.size() < count && std::chrono::steady_clock::now() < deadline) {
    for (auto& w : writer.take_completed()) done.push_back(std::move(w));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return done;
}

template <typename Segments>
Result<ForkedSnapshot> start_child(SnapshotJob job, Segments segments,
                                   std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  return ForkedSnapshot::start(std::move(job), segments, timeout);
}

} // namespace

TEST_CASE("a forked snapshot holds the state as it was at the fork", "[forked_snapshot]") {
  TempDir tmp;
  const fs::path path = tmp.path / "chain-0-subtask-0.snap";
  std::vector<std::string> state(16);
  for (std::size_t kg = 0; kg < state.size(); ++kg) state[kg] = std::string(1000 + kg, static_cast<char>('a' + kg));
  const std::vector<std::string> at_fork = state;

  auto child = start_child(make_job(path), [&] {
    // In the child: give the parent time to change its copy; this one must not see it.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::vector<SnapshotSegment> segments;
    for (std::uint32_t kg = 0; kg < state.size(); ++kg)
      segments.push_back({"agg", state::SegmentKind::Keyed, kg, state[kg]});
    return segments;
  });
  REQUIRE(child);
  CHECK(child->pid() > 0);
  for (auto& s : state) s = "changed after the fork";

  SnapshotWritten written = child->wait();
  INFO(written.error);
  REQUIRE(written.error.empty());
  CHECK(written.checkpoint_id == 7);
  CHECK(written.file_name == "chain-0-subtask-0.snap");
  CHECK(written.bytes == fs::file_size(path));
  std::uint64_t raw = 0;
  for (const auto& s : at_fork) raw += s.size();
  CHECK(written.raw_bytes == raw);
  for (std::uint32_t kg = 0; kg < at_fork.size(); ++kg) CHECK(segment_of(path, kg) == at_fork[kg]);
}

TEST_CASE("a forked snapshot's process keeps none of the parent's descriptors", "[forked_snapshot]") {
  TempDir tmp;
  int fds[2];
  REQUIRE(::pipe(fds) == 0); // not close-on-exec: fork alone would keep it open
  const fs::path path = tmp.path / "f.snap";
  auto child = start_child(make_job(path), [&] {
    const bool open = ::fcntl(fds[0], F_GETFD) != -1 || ::fcntl(fds[1], F_GETFD) != -1;
    return std::vector<SnapshotSegment>{{"agg", state::SegmentKind::Keyed, 0, open ? "open" : "closed"}};
  });
  REQUIRE(child);
  SnapshotWritten written = child->wait();
  ::close(fds[0]);
  ::close(fds[1]);
  REQUIRE(written.error.empty());
  CHECK(segment_of(path, 0) == "closed");
}

TEST_CASE("a forked snapshot that throws, cannot write or is killed fails with a reason",
          "[forked_snapshot]") {
  TempDir tmp;
  SECTION("the state cannot be serialised") {
    auto child = start_child(make_job(tmp.path / "a.snap"), []() -> std::vector<SnapshotSegment> {
      throw std::runtime_error("no memory for the state");
    });
    REQUIRE(child);
    SnapshotWritten written = child->wait();
    CHECK_THAT(written.error, Catch::Contains("no memory for the state"));
    CHECK_FALSE(fs::exists(tmp.path / "a.snap"));
  }
  SECTION("the checkpoint directory is gone") {
    auto child = start_child(make_job(tmp.path / "gone" / "b.snap"),
                                       [] { return std::vector<SnapshotSegment>{}; });
    REQUIRE(child);
    SnapshotWritten written = child->wait();
    CHECK_THAT(written.error, Catch::Contains((tmp.path / "gone").string()));
  }
  SECTION("kill -9 of the snapshot process") {
    auto child = start_child(make_job(tmp.path / "c.snap"), [] {
      std::this_thread::sleep_for(std::chrono::seconds(30));
      return std::vector<SnapshotSegment>{};
    });
    REQUIRE(child);
    REQUIRE(::kill(child->pid(), SIGKILL) == 0);
    const auto start = std::chrono::steady_clock::now();
    SnapshotWritten written = child->wait();
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
    CHECK_THAT(written.error, Catch::Contains("killed by signal 9"));
    CHECK_FALSE(fs::exists(tmp.path / "c.snap"));
  }
}

TEST_CASE("a forked snapshot that outlives its timeout is killed and fails", "[forked_snapshot]") {
  TempDir tmp;
  auto child = start_child(
      make_job(tmp.path / "e.snap"),
      [] {
        std::this_thread::sleep_for(std::chrono::seconds(30));
        return std::vector<SnapshotSegment>{};
      },
      std::chrono::milliseconds(300));
  REQUIRE(child);
  const pid_t pid = child->pid();
  const auto start = std::chrono::steady_clock::now();
  SnapshotWritten written = child->wait();
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  CHECK_THAT(written.error, Catch::Contains("did not finish before the checkpoint's timeout"));
  CHECK(::kill(pid, 0) == -1); // killed and reaped
  CHECK_FALSE(fs::exists(tmp.path / "e.snap"));
}

TEST_CASE("the snapshot writer waits for a forked snapshot in turn", "[forked_snapshot]") {
  TempDir tmp;
  // Forked before the writer starts its thread: under the sanitizers, a child forked while
  // another thread is inside ASan's allocator (the new thread setting up its cache) waits for
  // that lock forever. The worker does not fork in sanitizer builds for the same reason.
  auto child = start_child(make_job(tmp.path / "first.snap"), [] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    return std::vector<SnapshotSegment>{{"agg", state::SegmentKind::Keyed, 3, "forked"}};
  });
  REQUIRE(child);
  AsyncSnapshotWriter writer;
  writer.submit(make_job(tmp.path / "first.snap"), std::move(*child));
  CHECK(writer.forks_in_flight() == 1);
  SnapshotJob second = make_job(tmp.path / "second.snap");
  second.segments.push_back({"agg", state::SegmentKind::Keyed, 3, "in the writer"});
  writer.submit(std::move(second));

  std::vector<SnapshotWritten> done = wait_for_completed(writer, 2);
  REQUIRE(done.size() == 2);
  CHECK(done[0].file_name == "first.snap");
  CHECK(done[1].file_name == "second.snap");
  CHECK(done[0].error.empty());
  CHECK(writer.forks_in_flight() == 0);
  CHECK(segment_of(tmp.path / "first.snap", 3) == "forked");
  CHECK(segment_of(tmp.path / "second.snap", 3) == "in the writer");
}

TEST_CASE("destroying a forked snapshot kills and reaps its process", "[forked_snapshot]") {
  TempDir tmp;
  pid_t pid = -1;
  {
    auto child = start_child(make_job(tmp.path / "d.snap"), [] {
      std::this_thread::sleep_for(std::chrono::seconds(30));
      return std::vector<SnapshotSegment>{};
    });
    REQUIRE(child);
    pid = child->pid();
  }
  // Reaped: no such process any more (not even a zombie).
  CHECK(::kill(pid, 0) == -1);
}

// The writer keeps at most two snapshots: one being written, the newest queued. A job still
// queued when a later checkpoint's job comes belongs to a checkpoint the coordinator gave up
// (it starts one only once the one before is resolved), so it is dropped and reported failed.
TEST_CASE("a queued snapshot of an older checkpoint is dropped when a newer one comes",
          "[forked_snapshot][async_snapshot_writer]") {
  TempDir tmp;
  // A child that holds the writer's thread for a while (forked before that thread starts:
  // see "the snapshot writer waits for a forked snapshot in turn").
  SnapshotJob busy = make_job(tmp.path / "1.snap");
  busy.checkpoint_id = busy.header.checkpoint_id = 1;
  auto child = start_child(busy, [] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    return std::vector<SnapshotSegment>{{"agg", state::SegmentKind::Keyed, 3, "one"}};
  });
  REQUIRE(child);
  AsyncSnapshotWriter writer;
  writer.submit(std::move(busy), std::move(*child));
  const auto taken_by = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (writer.queued() > 0 && std::chrono::steady_clock::now() < taken_by)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  REQUIRE(writer.queued() == 0); // the writer waits for the child now
  for (std::uint64_t id : {2, 3}) {
    SnapshotJob job = make_job(tmp.path / (std::to_string(id) + ".snap"));
    job.checkpoint_id = job.header.checkpoint_id = id;
    job.segments.push_back({"agg", state::SegmentKind::Keyed, 3, "copy " + std::to_string(id)});
    writer.submit(std::move(job));
  }

  std::vector<SnapshotWritten> done = wait_for_completed(writer, 3);
  REQUIRE(done.size() == 3);
  // Checkpoint 2's job was dropped when 3's came, while the writer waited for 1's child.
  CHECK(done[0].checkpoint_id == 2);
  CHECK_THAT(done[0].error, Catch::Contains("dropped before it was written"));
  CHECK_FALSE(fs::exists(tmp.path / "2.snap"));
  CHECK(done[1].checkpoint_id == 1);
  CHECK(done[1].error.empty());
  CHECK(done[2].checkpoint_id == 3);
  CHECK(done[2].error.empty());
  CHECK(segment_of(tmp.path / "1.snap", 3) == "one");
  CHECK(segment_of(tmp.path / "3.snap", 3) == "copy 3");
}
