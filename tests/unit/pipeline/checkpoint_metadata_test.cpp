// Checkpoint directories and their _metadata (pipeline/runtime/checkpoint_metadata): the TOML
// round trip, every malformed or unsafe file refused naming the file, and the listing,
// choosing, numbering and pruning of checkpoints and savepoints under a job's root.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "pipeline/runtime/checkpoint_metadata.hpp"
#include "pipeline/runtime/metadata_checksum.hpp"
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

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

CheckpointMetadata sample_metadata() {
  CheckpointMetadata m;
  m.kind = "checkpoint";
  m.job_name = "page-views";
  m.job_id = "page-views-20261129-101500-1a2b";
  m.checkpoint_id = 7;
  m.created_at_ms = 1796000000000;
  m.max_parallelism = 64;
  m.tasks.push_back(CheckpointTaskFile{task_snapshot_file(0, 0), {"clicks", "ok"}, 0, 2, 1234});
  m.tasks.push_back(CheckpointTaskFile{task_snapshot_file(0, 1), {"clicks", "ok"}, 1, 2, 99});
  m.tasks.push_back(CheckpointTaskFile{task_snapshot_file(1, 0), {"out"}, 0, 1, 0});
  return m;
}

// A _metadata file as a person might have edited it, one field at a time.
std::string metadata_text(const std::string& format = "streamctl-checkpoint", const std::string& version = "1",
                          const std::string& file = "chain-0-subtask-0.snap",
                          const std::string& subtask = "0", const std::string& parallelism = "1",
                          const std::string& nodes = "[\"a\"]") {
  return "format = \"" + format + "\"\nversion = " + version +
         "\nkind = \"checkpoint\"\njob_name = \"j\"\njob_id = \"j-1\"\ncheckpoint_id = 3\n"
         "created_at = 1000\nmax_parallelism = 128\n[[tasks]]\nfile = \"" + file +
         "\"\nnodes = " + nodes + "\nsubtask = " + subtask + "\nparallelism = " + parallelism +
         "\nbytes = 10\n";
}

// A completed checkpoint (or savepoint) directory `name` under `root`.
fs::path make_completed(const fs::path& root, const std::string& name, std::uint64_t id, std::int64_t created_at,
                        const std::string& kind = "checkpoint") {
  fs::path dir = root / name;
  fs::create_directories(dir);
  CheckpointMetadata m;
  m.kind = kind;
  m.job_name = "j";
  m.job_id = "j-1";
  m.checkpoint_id = id;
  m.created_at_ms = created_at;
  m.tasks.push_back(CheckpointTaskFile{task_snapshot_file(0, 0), {"a"}, 0, 1, 10});
  auto ok = write_metadata(dir, m);
  REQUIRE(ok);
  return dir;
}

// A checkpoint directory with task files but no _metadata: one that never completed.
fs::path make_incomplete(const fs::path& root, const std::string& name) {
  fs::path dir = root / name;
  fs::create_directories(dir);
  write_text(dir / task_snapshot_file(0, 0), "partial");
  return dir;
}

std::vector<std::string> names(const std::vector<fs::path>& paths) {
  std::vector<std::string> out;
  for (const auto& p : paths) out.push_back(p.filename().string());
  return out;
}

using Strings = std::vector<std::string>;

// latest_restorable, which must not fail here.
std::optional<fs::path> latest(const fs::path& root) {
  auto r = latest_restorable(root);
  REQUIRE(r);
  return *r;
}

} // namespace

TEST_CASE("task snapshot files are named after chain and subtask", "[checkpoint_metadata]") {
  CHECK(task_snapshot_file(0, 1) == "chain-0-subtask-1.snap");
  CHECK(task_snapshot_file(12, 3) == "chain-12-subtask-3.snap");
}

TEST_CASE("metadata written is read back field by field", "[checkpoint_metadata]") {
  TempDir tmp;
  CheckpointMetadata m = sample_metadata();
  REQUIRE(write_metadata(tmp.path, m));
  CHECK(fs::exists(tmp.path / kMetadataFile));

  auto r = read_metadata(tmp.path);
  REQUIRE(r);
  CHECK(r->kind == m.kind);
  CHECK(r->job_name == m.job_name);
  CHECK(r->job_id == m.job_id);
  CHECK(r->checkpoint_id == m.checkpoint_id);
  CHECK(r->created_at_ms == m.created_at_ms);
  CHECK(r->max_parallelism == m.max_parallelism);
  REQUIRE(r->tasks.size() == m.tasks.size());
  for (std::size_t k = 0; k < m.tasks.size(); ++k) {
    CAPTURE(k);
    CHECK(r->tasks[k].file == m.tasks[k].file);
    CHECK(r->tasks[k].nodes == m.tasks[k].nodes);
    CHECK(r->tasks[k].subtask == m.tasks[k].subtask);
    CHECK(r->tasks[k].parallelism == m.tasks[k].parallelism);
    CHECK(r->tasks[k].bytes == m.tasks[k].bytes);
  }
}

TEST_CASE("savepoint kind and strings needing escapes survive the round trip", "[checkpoint_metadata]") {
  TempDir tmp;
  CheckpointMetadata m = sample_metadata();
  m.kind = "savepoint";
  m.job_name = "quote \" backslash \\ newline \n end";
  REQUIRE(write_metadata(tmp.path, m));
  auto r = read_metadata(tmp.path);
  REQUIRE(r);
  CHECK(r->kind == "savepoint");
  CHECK(r->job_name == m.job_name);
}

TEST_CASE("metadata can be read through the path of the _metadata file itself", "[checkpoint_metadata]") {
  TempDir tmp;
  REQUIRE(write_metadata(tmp.path, sample_metadata()));
  auto r = read_metadata(tmp.path / kMetadataFile);
  REQUIRE(r);
  CHECK(r->checkpoint_id == 7);
  CHECK(checkpoint_dir_of(tmp.path / kMetadataFile) == tmp.path);
  CHECK(checkpoint_dir_of(tmp.path) == tmp.path);
}

TEST_CASE("a directory without _metadata is refused as incomplete naming the file", "[checkpoint_metadata]") {
  TempDir tmp;
  auto r = read_metadata(tmp.path);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error(), Catch::Contains((tmp.path / kMetadataFile).string()));
  CHECK_THAT(r.error(), Catch::Contains("missing"));
}

TEST_CASE("a directory that does not exist is refused naming it", "[checkpoint_metadata]") {
  TempDir tmp;
  auto r = read_metadata(tmp.path / "chk-9");
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error(), Catch::Contains((tmp.path / "chk-9").string()));
  CHECK_THAT(r.error(), Catch::Contains("no such checkpoint"));
}

TEST_CASE("metadata that is not TOML is refused naming the file", "[checkpoint_metadata]") {
  TempDir tmp;
  write_text(tmp.path / kMetadataFile, "format = \"streamctl-checkpoint\nversion = = 1\n");
  auto r = read_metadata(tmp.path);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error(), Catch::Contains((tmp.path / kMetadataFile).string()));
  CHECK_THAT(r.error(), Catch::Contains("not valid metadata"));
}

TEST_CASE("the hand-written metadata fixture is accepted", "[checkpoint_metadata]") {
  // Guards the fixture the rejection tests below edit one field of.
  TempDir tmp;
  write_text(tmp.path / kMetadataFile, metadata_text());
  auto r = read_metadata(tmp.path);
  REQUIRE(r);
  CHECK(r->checkpoint_id == 3);
  REQUIRE(r->tasks.size() == 1);
  CHECK(r->tasks[0].nodes == Strings{"a"});
}

TEST_CASE("metadata of another format is refused", "[checkpoint_metadata]") {
  TempDir tmp;
  write_text(tmp.path / kMetadataFile, metadata_text("something-else"));
  auto r = read_metadata(tmp.path);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error(), Catch::Contains((tmp.path / kMetadataFile).string()));
  CHECK_THAT(r.error(), Catch::Contains("not a streamctl checkpoint metadata file"));
}

TEST_CASE("metadata of an unknown version is refused naming the version", "[checkpoint_metadata]") {
  TempDir tmp;
  write_text(tmp.path / kMetadataFile, append_checksum_line(metadata_text("streamctl-checkpoint", "4")));
  auto r = read_metadata(tmp.path);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error(), Catch::Contains((tmp.path / kMetadataFile).string()));
  CHECK_THAT(r.error(), Catch::Contains("metadata version 4"));
}

TEST_CASE("task file names that leave the checkpoint directory are refused", "[checkpoint_metadata]") {
  for (std::string bad : {"../x", "a/b", "/etc/passwd", "..", ".hidden", ""}) {
    CAPTURE(bad);
    TempDir tmp;
    write_text(tmp.path / kMetadataFile, metadata_text("streamctl-checkpoint", "1", bad));
    auto r = read_metadata(tmp.path);
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error(), Catch::Contains("bad task file name '" + bad + "'"));
  }
}

TEST_CASE("a bad task file name written by write_metadata is refused on reading", "[checkpoint_metadata]") {
  TempDir tmp;
  CheckpointMetadata m = sample_metadata();
  m.tasks[1].file = "../x";
  REQUIRE(write_metadata(tmp.path, m));
  auto r = read_metadata(tmp.path);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error(), Catch::Contains("'../x'"));
}

TEST_CASE("a task with a subtask outside its parallelism or no nodes is refused", "[checkpoint_metadata]") {
  TempDir tmp;
  SECTION("subtask equal to parallelism") {
    write_text(tmp.path / kMetadataFile, metadata_text("streamctl-checkpoint", "1", "f.snap", "2", "2"));
    auto r = read_metadata(tmp.path);
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error(), Catch::Contains("bad subtask/parallelism"));
  }
  SECTION("parallelism zero") {
    write_text(tmp.path / kMetadataFile, metadata_text("streamctl-checkpoint", "1", "f.snap", "0", "0"));
    auto r = read_metadata(tmp.path);
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error(), Catch::Contains("parallelism 0 is not within 1..max_parallelism (128)"));
  }
  SECTION("no nodes") {
    write_text(tmp.path / kMetadataFile, metadata_text("streamctl-checkpoint", "1", "f.snap", "0", "1", "[]"));
    auto r = read_metadata(tmp.path);
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error(), Catch::Contains("no nodes"));
  }
}

TEST_CASE("completed checkpoints are listed oldest first without savepoints or incomplete ones",
          "[checkpoint_metadata]") {
  TempDir tmp;
  make_completed(tmp.path, "chk-2", 2, 2000);
  make_completed(tmp.path, "chk-10", 10, 10000);
  make_completed(tmp.path, "chk-1", 1, 1000);
  make_completed(tmp.path, "savepoint-20261129", 5, 5000, "savepoint");
  make_incomplete(tmp.path, "chk-11");
  make_completed(tmp.path, "chk-x", 3, 3000); // not a chk-N name
  fs::create_directories(tmp.path / "spool");
  CHECK(names(completed_checkpoints(tmp.path)) == Strings{"chk-1", "chk-2", "chk-10"});
}

TEST_CASE("no completed checkpoints under a missing root", "[checkpoint_metadata]") {
  TempDir tmp;
  CHECK(completed_checkpoints(tmp.path / "missing").empty());
  CHECK_FALSE(latest(tmp.path / "missing").has_value());
  CHECK(next_checkpoint_id(tmp.path / "missing") == 1);
  CHECK(prune_checkpoints(tmp.path / "missing", 1, std::nullopt).empty());
}

TEST_CASE("latest restorable is the newest by id and a newer savepoint wins", "[checkpoint_metadata]") {
  TempDir tmp;
  make_completed(tmp.path, "chk-4", 4, 1000);
  make_completed(tmp.path, "chk-5", 5, 1500);
  make_incomplete(tmp.path, "chk-6"); // never restored
  auto latest = ::latest(tmp.path);
  REQUIRE(latest);
  CHECK(latest->filename() == "chk-5");

  // A savepoint taken after chk-5 (its id comes from the same counter) is newer.
  make_completed(tmp.path, "savepoint-a", 7, 2000, "savepoint");
  latest = ::latest(tmp.path);
  REQUIRE(latest);
  CHECK(latest->filename() == "savepoint-a");

  // ... until a checkpoint completes after it.
  make_completed(tmp.path, "chk-8", 8, 3000);
  latest = ::latest(tmp.path);
  REQUIRE(latest);
  CHECK(latest->filename() == "chk-8");
}

TEST_CASE("a system clock stepped back neither hides nor prunes the newest checkpoint", "[checkpoint_metadata]") {
  TempDir tmp;
  const std::int64_t t = 1796000000000;
  make_completed(tmp.path, "chk-1", 1, t);
  make_completed(tmp.path, "chk-2", 2, t + 1000);
  // The clock stepped back an hour between chk-2 and chk-3.
  make_completed(tmp.path, "chk-3", 3, t + 1000 - 3600 * 1000);
  auto latest = ::latest(tmp.path);
  REQUIRE(latest);
  CHECK(latest->filename() == "chk-3");
  CHECK(names(completed_checkpoints(tmp.path)) == Strings{"chk-1", "chk-2", "chk-3"});

  auto problems = prune_checkpoints(tmp.path, 1, std::nullopt);
  CHECK(problems.empty());
  CHECK(names(completed_checkpoints(tmp.path)) == Strings{"chk-3"});
}

TEST_CASE("latest restorable breaks an id tie by created_at", "[checkpoint_metadata]") {
  TempDir tmp;
  make_completed(tmp.path, "chk-9", 9, 1000);
  make_completed(tmp.path, "savepoint-b", 9, 2000, "savepoint");
  auto latest = ::latest(tmp.path);
  REQUIRE(latest);
  CHECK(latest->filename() == "savepoint-b");
}

TEST_CASE("a run that drained hides the snapshots it left, by id, whatever the clock", "[checkpoint_metadata]") {
  TempDir tmp;
  make_completed(tmp.path, "chk-1", 1, 5000);
  make_completed(tmp.path, "chk-2", 2, 6000);
  REQUIRE(mark_drained(tmp.path));
  CHECK(read_text(tmp.path / "drained").rfind("checkpoint 2 at ", 0) == 0);
  CHECK_FALSE(latest(tmp.path).has_value());

  // The next run's checkpoint, with a clock that is far behind the drained run's (and the
  // drained file's time, which is now): still resumed from.
  make_completed(tmp.path, "chk-3", 3, 1000);
  auto latest = ::latest(tmp.path);
  REQUIRE(latest);
  CHECK(latest->filename() == "chk-3");

  // A damaged snapshot with a newer id than the drained run's is refused, one below is not.
  fs::create_directories(tmp.path / "chk-4");
  write_text(tmp.path / "chk-4" / "_metadata", "garbage");
  CHECK_FALSE(latest_restorable(tmp.path));
  fs::remove_all(tmp.path / "chk-4");
  fs::create_directories(tmp.path / "chk-0");
  write_text(tmp.path / "chk-0" / "_metadata", "garbage");
  CHECK(::latest(tmp.path)->filename() == "chk-3");
}

TEST_CASE("a drained file of an older streamctl (epoch ms) still compares by time", "[checkpoint_metadata]") {
  TempDir tmp;
  make_completed(tmp.path, "chk-1", 1, 5000);
  write_text(tmp.path / "drained", "5000\n");
  CHECK_FALSE(latest(tmp.path).has_value());
  make_completed(tmp.path, "chk-2", 2, 5001);
  CHECK(latest(tmp.path)->filename() == "chk-2");
}

TEST_CASE("a damaged drained file is refused, naming it", "[checkpoint_metadata]") {
  TempDir tmp;
  make_completed(tmp.path, "chk-1", 1, 5000);
  for (std::string text : {"", "checkpoint x at 5", "checkpoint 3 5", "12abc\n"}) {
    write_text(tmp.path / "drained", text);
    auto r = latest_restorable(tmp.path);
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error(), Catch::Contains("drained is damaged"));
  }
}

TEST_CASE("nothing is restorable when only incomplete checkpoints exist", "[checkpoint_metadata]") {
  TempDir tmp;
  make_incomplete(tmp.path, "chk-1");
  make_incomplete(tmp.path, "savepoint-x");
  CHECK_FALSE(latest(tmp.path).has_value());
}

TEST_CASE("next checkpoint id follows the largest chk-N name or savepoint id", "[checkpoint_metadata]") {
  TempDir tmp;
  CHECK(next_checkpoint_id(tmp.path) == 1);
  make_completed(tmp.path, "chk-3", 3, 100);
  CHECK(next_checkpoint_id(tmp.path) == 4);
  make_incomplete(tmp.path, "chk-7"); // an id used by a failed checkpoint is not used again
  CHECK(next_checkpoint_id(tmp.path) == 8);
  make_completed(tmp.path, "savepoint-x", 12, 200, "savepoint");
  CHECK(next_checkpoint_id(tmp.path) == 13);
  make_incomplete(tmp.path, "chk-abc"); // not a chk-N name
  make_incomplete(tmp.path, "chk-");
  CHECK(next_checkpoint_id(tmp.path) == 13);
}

TEST_CASE("prune keeps the newest retained checkpoints and deletes older incomplete ones never savepoints",
          "[checkpoint_metadata]") {
  TempDir tmp;
  make_completed(tmp.path, "chk-1", 1, 1000);
  make_completed(tmp.path, "chk-2", 2, 2000);
  make_incomplete(tmp.path, "chk-3"); // older than the newest completed: deleted
  make_completed(tmp.path, "chk-4", 4, 4000);
  make_completed(tmp.path, "chk-5", 5, 5000);
  make_incomplete(tmp.path, "chk-6"); // in progress: kept
  make_completed(tmp.path, "savepoint-old", 1, 500, "savepoint");
  make_incomplete(tmp.path, "savepoint-half");
  fs::create_directories(tmp.path / "spool");

  auto problems = prune_checkpoints(tmp.path, 2, 6);
  CHECK(problems.empty());
  CHECK_FALSE(fs::exists(tmp.path / "chk-1"));
  CHECK_FALSE(fs::exists(tmp.path / "chk-2"));
  CHECK_FALSE(fs::exists(tmp.path / "chk-3"));
  CHECK(fs::exists(tmp.path / "chk-4" / kMetadataFile));
  CHECK(fs::exists(tmp.path / "chk-5" / kMetadataFile));
  CHECK(fs::exists(tmp.path / "chk-6"));
  CHECK(fs::exists(tmp.path / "savepoint-old" / kMetadataFile));
  CHECK(fs::exists(tmp.path / "savepoint-half"));
  CHECK(fs::exists(tmp.path / "spool"));
  CHECK(names(completed_checkpoints(tmp.path)) == Strings{"chk-4", "chk-5"});
}

TEST_CASE("prune with fewer completed checkpoints than retained deletes none of them", "[checkpoint_metadata]") {
  TempDir tmp;
  make_completed(tmp.path, "chk-1", 1, 1000);
  make_completed(tmp.path, "chk-2", 2, 2000);
  CHECK(prune_checkpoints(tmp.path, 5, std::nullopt).empty());
  CHECK(names(completed_checkpoints(tmp.path)) == Strings{"chk-1", "chk-2"});
}

TEST_CASE("prune never deletes the newest completed checkpoint even when retain is zero",
          "[checkpoint_metadata]") {
  TempDir tmp;
  make_completed(tmp.path, "chk-1", 1, 1000);
  make_completed(tmp.path, "chk-2", 2, 2000);
  CHECK(prune_checkpoints(tmp.path, 0, std::nullopt).empty());
  CHECK(names(completed_checkpoints(tmp.path)) == Strings{"chk-2"});
}

// Issue 7, finding 10: checkpoints that failed (a full disk) before any completed left their
// chk-N directories for ever; prune only deleted incomplete ones older than a completed one.
TEST_CASE("prune deletes every incomplete checkpoint but the one in flight, even with none completed",
          "[checkpoint_metadata]") {
  TempDir tmp;
  fs::create_directories(tmp.path / "chk-1"); // empty: a failed checkpoint
  make_incomplete(tmp.path, "chk-2");
  make_incomplete(tmp.path, "chk-3"); // being written
  CHECK(prune_checkpoints(tmp.path, 1, 3).empty());
  CHECK_FALSE(fs::exists(tmp.path / "chk-1"));
  CHECK_FALSE(fs::exists(tmp.path / "chk-2"));
  CHECK(fs::exists(tmp.path / "chk-3"));

  // Newer than the newest completed and not in flight: a failed one too.
  make_completed(tmp.path, "chk-4", 4, 4000);
  fs::create_directories(tmp.path / "chk-5");
  CHECK(prune_checkpoints(tmp.path, 1, std::nullopt).empty());
  CHECK_FALSE(fs::exists(tmp.path / "chk-3"));
  CHECK_FALSE(fs::exists(tmp.path / "chk-5"));
  CHECK(fs::exists(tmp.path / "chk-4" / kMetadataFile));
}

TEST_CASE("prune deletes a damaged checkpoint older than the newest completed, not a newer one",
          "[checkpoint_metadata]") {
  TempDir tmp;
  fs::path old_one = make_completed(tmp.path, "chk-1", 1, 1000);
  make_completed(tmp.path, "chk-2", 2, 2000);
  fs::path new_one = make_completed(tmp.path, "chk-3", 3, 3000);
  make_completed(tmp.path, "chk-4", 4, 4000);
  write_text(old_one / kMetadataFile, "damaged");
  write_text(new_one / kMetadataFile, "damaged");
  fs::remove_all(tmp.path / "chk-4");
  // chk-3 is damaged and newest: kept for a person to look at.
  CHECK(prune_checkpoints(tmp.path, 5, std::nullopt).empty());
  CHECK_FALSE(fs::exists(old_one));
  CHECK(fs::exists(new_one / kMetadataFile));
  CHECK(fs::exists(tmp.path / "chk-2" / kMetadataFile));
}

// A run restored a snapshot (mark_restored) and died before its first checkpoint: a resume
// went back to the newest snapshot under the job's directory, older than what the run had
// published from (a savepoint on another file system is not there; a restored older savepoint
// leaves newer checkpoints of another timeline). The chaos savepoint scenario found it: exit 0
// with records repeated (seed 7501).
TEST_CASE("a resume goes on from the snapshot the last run started from until a newer one completes",
          "[checkpoint_metadata]") {
  TempDir tmp;
  const fs::path root = tmp.path / "j";
  make_completed(root, "chk-3", 3, 1000);
  SECTION("a savepoint elsewhere, with a newer id") {
    const fs::path elsewhere = make_completed(tmp.path / "moved", "mine", 4, 1100, "savepoint");
    REQUIRE(mark_restored(root, elsewhere, 4));
    CHECK(next_checkpoint_id(root) == 5);
    CHECK(latest(root) == elsewhere);
    make_completed(root, "chk-5", 5, 1200); // the run's first checkpoint
    CHECK(latest(root) == root / "chk-5");
  }
  SECTION("an older savepoint: the newer checkpoints are of the timeline it left") {
    const fs::path older = make_completed(root, "savepoint-20261206-101500-2", 2, 900, "savepoint");
    REQUIRE(mark_restored(root, older, 2));
    CHECK(next_checkpoint_id(root) == 4);
    CHECK(latest(root) == older);
    make_incomplete(root, "chk-4"); // the run's first checkpoint, cut short
    CHECK(latest(root) == older);
  }
  SECTION("the snapshot gone: refused, naming it") {
    const fs::path elsewhere = make_completed(tmp.path / "moved", "mine", 4, 1100, "savepoint");
    REQUIRE(mark_restored(root, elsewhere, 4));
    fs::remove_all(elsewhere);
    auto r = latest_restorable(root);
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error(), Catch::Contains(elsewhere.string()) && Catch::Contains("gone"));
  }
  SECTION("a run that drained after it: nothing to resume") {
    const fs::path elsewhere = make_completed(tmp.path / "moved", "mine", 4, 1100, "savepoint");
    REQUIRE(mark_restored(root, elsewhere, 4));
    REQUIRE(mark_drained(root));
    CHECK_FALSE(latest(root));
  }
  SECTION("a damaged record is refused") {
    write_text(root / "restored", "restored = 12\n");
    auto r = latest_restorable(root);
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error(), Catch::Contains("restored is damaged"));
  }
}
