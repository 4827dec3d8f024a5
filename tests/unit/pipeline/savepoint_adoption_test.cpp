// A savepoint adopted as the job's newest checkpoint (pipeline/runtime/savepoint_adoption):
// hard links to its files and its metadata as a checkpoint, and no adoption wherever a resume
// from it would not be the newest snapshot, or the files cannot be linked, leaving nothing
// behind.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "pipeline/runtime/checkpoint_metadata.hpp"
#include "pipeline/runtime/savepoint_adoption.hpp"
#include "unit/temp_dir.hpp"

using namespace streamctl::runtime;
using streamctl::testing::TempDir;
namespace fs = std::filesystem;

namespace {

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  REQUIRE(out.good());
}

ino_t inode_of(const fs::path& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_ino;
}

// A snapshot directory `name` under `root` with two task files of some bytes (adoption reads
// the metadata and links the files; it never parses them).
fs::path make_snapshot(const fs::path& root, const std::string& name, std::uint64_t id,
                       const std::string& kind = "savepoint", const std::string& job = "clicks") {
  const fs::path dir = root / name;
  fs::create_directories(dir);
  CheckpointMetadata m;
  m.kind = kind;
  m.job_name = job;
  m.job_id = job + "-20261206-101500-1a2b";
  m.checkpoint_id = id;
  m.created_at_ms = 1796000000000;
  for (int s = 0; s < 2; ++s) {
    const std::string file = task_snapshot_file(0, s);
    write_text(dir / file, "state of subtask " + std::to_string(s));
    m.tasks.push_back(CheckpointTaskFile{file, {"gen", "count"}, s, 2, 18});
  }
  REQUIRE(write_metadata(dir, m));
  return dir;
}

} // namespace

TEST_CASE("a savepoint is adopted as the newest checkpoint, by hard links", "[savepoint_adoption]") {
  TempDir tmp;
  const fs::path root = tmp.path / "clicks";
  make_snapshot(root, "chk-4", 4, "checkpoint");
  SECTION("a savepoint inside the job's directory, the newest snapshot there") {
    const fs::path savepoint = make_snapshot(root, "savepoint-20261206-101500-5", 5);
    auto adopted = adopt_savepoint(root, savepoint, "clicks");
    REQUIRE(adopted);
    CHECK(*adopted == root / "chk-5");
    auto m = read_metadata(*adopted);
    REQUIRE(m);
    CHECK(m->kind == "checkpoint");
    CHECK(m->checkpoint_id == 5);
    REQUIRE(m->tasks.size() == 2);
    for (const auto& task : m->tasks) CHECK(inode_of(*adopted / task.file) == inode_of(savepoint / task.file));
    CHECK(read_metadata(savepoint)->kind == "savepoint");
    CHECK(completed_checkpoints(root).back() == root / "chk-5");
    CHECK(next_checkpoint_id(root) == 6);
    // The person deletes the savepoint: the checkpoint keeps its files.
    fs::remove_all(savepoint);
    CHECK(fs::file_size(*adopted / task_snapshot_file(0, 1)) == std::string("state of subtask 1").size());
  }
  SECTION("a savepoint moved elsewhere, with a newer id than any under the job's directory") {
    const fs::path savepoint = make_snapshot(tmp.path / "moved", "mine", 9);
    auto adopted = adopt_savepoint(root, savepoint / "_metadata", "clicks");
    REQUIRE(adopted);
    CHECK(*adopted == root / "chk-9");
  }
}

TEST_CASE("no savepoint is adopted where a resume from it would not be the newest", "[savepoint_adoption]") {
  TempDir tmp;
  const fs::path root = tmp.path / "clicks";
  const fs::path savepoint = make_snapshot(root, "savepoint-20261206-101500-5", 5);
  std::string why;
  SECTION("a newer checkpoint") {
    make_snapshot(root, "chk-7", 7, "checkpoint");
    why = "as new as";
  }
  SECTION("a newer savepoint") {
    make_snapshot(root, "savepoint-20261206-101600-6", 6);
    why = "as new as";
  }
  SECTION("an incomplete checkpoint with the savepoint's id: a crashed adoption") {
    fs::create_directories(root / "chk-5");
    why = "as new as";
  }
  SECTION("a run drained past it") {
    write_text(root / "drained", "checkpoint 5 at 1796000000000\n");
    why = "as new as";
  }
  SECTION("a drained run of an older streamctl, recorded by time only") {
    write_text(root / "drained", "1796000000000\n");
    why = "not which snapshots";
  }
  SECTION("another job's savepoint") {
    const fs::path other = make_snapshot(tmp.path / "elsewhere", "theirs", 8, "savepoint", "views");
    auto adopted = adopt_savepoint(root, other, "clicks");
    REQUIRE_FALSE(adopted);
    CHECK_THAT(adopted.error(), Catch::Contains("of job 'views'"));
    CHECK_FALSE(fs::exists(root / "chk-8"));
    return;
  }
  SECTION("a checkpoint, not a savepoint") {
    const fs::path chk = make_snapshot(tmp.path / "elsewhere", "chk-8", 8, "checkpoint");
    auto adopted = adopt_savepoint(root, chk, "clicks");
    REQUIRE_FALSE(adopted);
    CHECK_THAT(adopted.error(), Catch::Contains("not a savepoint"));
    return;
  }
  const bool crashed_before = fs::exists(root / "chk-5");
  auto adopted = adopt_savepoint(root, savepoint, "clicks");
  REQUIRE_FALSE(adopted);
  CHECK_THAT(adopted.error(), Catch::Contains(why));
  CHECK(fs::exists(root / "chk-5") == crashed_before);
  CHECK_FALSE(fs::exists(root / "chk-5" / "_metadata"));
}

TEST_CASE("a savepoint whose files cannot all be linked is not adopted, and nothing is left", "[savepoint_adoption]") {
  TempDir tmp;
  const fs::path root = tmp.path / "clicks";
  fs::create_directories(root);
  const fs::path savepoint = make_snapshot(tmp.path, "moved", 5);
  fs::remove(savepoint / task_snapshot_file(0, 1));
  auto adopted = adopt_savepoint(root, savepoint, "clicks");
  REQUIRE_FALSE(adopted);
  CHECK_THAT(adopted.error(), Catch::Contains("cannot link"));
  CHECK_FALSE(fs::exists(root / "chk-5"));
  CHECK(next_checkpoint_id(root) == 1);
}

TEST_CASE("an adoption cut short leaves links that the next prune removes, not the savepoint's files",
          "[savepoint_adoption]") {
  TempDir tmp;
  const fs::path root = tmp.path / "clicks";
  const fs::path savepoint = make_snapshot(root, "savepoint-20261206-101500-5", 5);
  // As a crash between the links and the _metadata leaves it.
  fs::create_directories(root / "chk-5");
  for (int s = 0; s < 2; ++s)
    fs::create_hard_link(savepoint / task_snapshot_file(0, s), root / "chk-5" / task_snapshot_file(0, s));
  CHECK(completed_checkpoints(root).empty());
  CHECK(prune_checkpoints(root, 1, std::nullopt).empty());
  CHECK_FALSE(fs::exists(root / "chk-5"));
  for (int s = 0; s < 2; ++s)
    CHECK(fs::file_size(savepoint / task_snapshot_file(0, s)) == std::string("state of subtask 0").size());
  CHECK(read_metadata(savepoint));
}
