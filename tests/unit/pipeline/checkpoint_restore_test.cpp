// Reading a checkpoint back (pipeline/runtime/checkpoint_restore): keyed state found by key
// group in whichever old file owned it, per-subtask state indexed by old subtask, damaged or
// missing task files refused naming the file, and the compatibility check against a pipeline.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <utility>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "operators/registry.hpp"
#include "pipeline/runtime/checkpoint_metadata.hpp"
#include "pipeline/runtime/checkpoint_restore.hpp"
#include "pipeline/runtime/job_loader.hpp"
#include "state/key_group.hpp"
#include "state/snapshot_format.hpp"
#include "unit/temp_dir.hpp"

using namespace streamctl;
using runtime::CheckpointRestore;
using streamctl::testing::TempDir;
namespace fs = std::filesystem;

namespace {

constexpr std::uint32_t kMaxParallelism = 128;
constexpr int kOldParallelism = 2;
const std::vector<std::string> kChain = {"src", "counts"};

// Key groups 0, 3, 6, ... have no state: a subtask writes no segment for an empty group.
bool has_state(std::uint32_t key_group) { return key_group % 3 != 0; }
std::string keyed_bytes(std::uint32_t key_group) {
  return "counts-of-group-" + std::to_string(key_group) + std::string(key_group, 'x');
}
std::string position_bytes(int subtask) { return "offset=" + std::to_string(1000 + subtask); }

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

void flip_byte(const fs::path& path, std::uint64_t offset) {
  std::string bytes = read_file(path);
  REQUIRE(offset < bytes.size());
  bytes[offset] = static_cast<char>(bytes[offset] ^ 0x5A);
  write_file(path, bytes);
}

// Checkpoint 3 of a job whose chain "src -> counts" ran with parallelism 2: subtask i wrote
// the keyed state of "counts" for the key groups it owned, its source position, and (subtask
// 0 only) subtask state of "counts"; then the coordinator wrote _metadata.
fs::path write_checkpoint(const fs::path& root) {
  fs::path dir = root / "chk-3";
  fs::create_directories(dir);
  runtime::CheckpointMetadata m;
  m.job_name = "p";
  m.job_id = "p-1";
  m.checkpoint_id = 3;
  m.created_at_ms = 1796000000000;
  m.max_parallelism = static_cast<int>(kMaxParallelism);
  for (int i = 0; i < kOldParallelism; ++i) {
    state::SnapshotHeader h;
    h.job_name = "p";
    h.checkpoint_id = 3;
    h.created_at_ms = m.created_at_ms;
    h.max_parallelism = kMaxParallelism;
    h.chain_id = 0;
    h.subtask = static_cast<std::uint32_t>(i);
    h.parallelism = kOldParallelism;
    h.key_groups = state::key_group_range(i, kOldParallelism, kMaxParallelism);
    h.chain_nodes = kChain;
    const auto range = h.key_groups;
    std::string file = runtime::task_snapshot_file(0, i);
    auto writer = state::SnapshotWriter::create(dir / file, std::move(h));
    REQUIRE(writer);
    REQUIRE(writer->add_segment("src", state::SegmentKind::SourcePosition, state::no_key_group, position_bytes(i)));
    for (std::uint32_t kg = range.first; kg < range.end; ++kg)
      if (has_state(kg)) REQUIRE(writer->add_segment("counts", state::SegmentKind::Keyed, kg, keyed_bytes(kg)));
    if (i == 0)
      REQUIRE(writer->add_segment("counts", state::SegmentKind::Subtask, state::no_key_group, "subtask-0-state"));
    auto summary = writer->finish();
    REQUIRE(summary);
    m.tasks.push_back(runtime::CheckpointTaskFile{file, kChain, i, kOldParallelism, summary->file_bytes});
  }
  REQUIRE(runtime::write_metadata(dir, m));
  return dir;
}

pipeline::PipelineSpec load_spec(const std::string& text) {
  operators::Registry registry;
  operators::register_builtin_types(registry);
  return runtime::load_job_text(text, "restore.toml", fs::current_path(), {}, registry).spec;
}

std::string pipeline_text(const std::string& counts_name, int max_parallelism) {
  return "name = \"p\"\nmax_parallelism = " + std::to_string(max_parallelism) +
         "\n[sources.src]\ntype = \"stdin\"\n[operators." + counts_name +
         "]\ntype = \"reduce\"\ninputs = [\"src\"]\nkey = [\"k\"]\naggregates = { n = \"count()\" }\n"
         "[sinks.out]\ntype = \"stdout\"\ninputs = [\"" + counts_name + "\"]\n";
}

} // namespace

TEST_CASE("restore finds each key group's state in the file of the subtask that owned it",
          "[checkpoint_restore]") {
  TempDir tmp;
  fs::path dir = write_checkpoint(tmp.path);
  auto r = CheckpointRestore::open(dir);
  REQUIRE(r);
  CHECK(r->dir() == dir);
  CHECK(r->metadata().checkpoint_id == 3);
  CHECK(r->metadata().tasks.size() == 2);
  for (std::uint32_t kg = 0; kg < kMaxParallelism; ++kg) {
    CAPTURE(kg);
    auto bytes = r->keyed("counts", kg);
    REQUIRE(bytes);
    if (has_state(kg)) {
      REQUIRE(bytes->has_value());
      CHECK(**bytes == keyed_bytes(kg));
    } else {
      CHECK_FALSE(bytes->has_value());
    }
  }
}

TEST_CASE("restore opens a checkpoint through the path of its _metadata file", "[checkpoint_restore]") {
  TempDir tmp;
  fs::path dir = write_checkpoint(tmp.path);
  auto r = CheckpointRestore::open(dir / runtime::kMetadataFile);
  REQUIRE(r);
  CHECK(r->dir() == dir);
  auto bytes = r->keyed("counts", 100);
  REQUIRE(bytes);
  REQUIRE(bytes->has_value());
  CHECK(**bytes == keyed_bytes(100));
}

TEST_CASE("restore has no keyed state for a node that wrote none or is not in the snapshot",
          "[checkpoint_restore]") {
  TempDir tmp;
  auto r = CheckpointRestore::open(write_checkpoint(tmp.path));
  REQUIRE(r);
  auto src = r->keyed("src", 1);
  REQUIRE(src);
  CHECK_FALSE(src->has_value());
  auto other = r->keyed("elsewhere", 1);
  REQUIRE(other);
  CHECK_FALSE(other->has_value());
}

TEST_CASE("per_subtask returns one entry per old subtask with empty strings where none was written",
          "[checkpoint_restore]") {
  TempDir tmp;
  auto r = CheckpointRestore::open(write_checkpoint(tmp.path));
  REQUIRE(r);
  auto positions = r->per_subtask("src", state::SegmentKind::SourcePosition);
  REQUIRE(positions);
  CHECK(*positions == std::vector<std::string>{position_bytes(0), position_bytes(1)});

  auto subtask_state = r->per_subtask("counts", state::SegmentKind::Subtask);
  REQUIRE(subtask_state);
  CHECK(*subtask_state == std::vector<std::string>{"subtask-0-state", ""});

  auto none_of_kind = r->per_subtask("counts", state::SegmentKind::SinkPending);
  REQUIRE(none_of_kind);
  CHECK(*none_of_kind == std::vector<std::string>{"", ""});

  auto absent = r->per_subtask("elsewhere", state::SegmentKind::Subtask);
  REQUIRE(absent);
  CHECK(absent->empty());
}

TEST_CASE("restore knows which nodes have state and which are in the snapshot", "[checkpoint_restore]") {
  TempDir tmp;
  auto r = CheckpointRestore::open(write_checkpoint(tmp.path));
  REQUIRE(r);
  CHECK(r->nodes_with_state() == std::set<std::string>{"counts", "src"});
  CHECK(r->has_node("src"));
  CHECK(r->has_node("counts"));
  CHECK_FALSE(r->has_node("out"));
}

TEST_CASE("a flipped byte in a keyed segment fails that read naming the file", "[checkpoint_restore]") {
  TempDir tmp;
  fs::path dir = write_checkpoint(tmp.path);
  fs::path file = dir / runtime::task_snapshot_file(0, 1);
  {
    auto reader = state::SnapshotReader::open(file);
    REQUIRE(reader);
    const state::SegmentInfo* segment = reader->find("counts", state::SegmentKind::Keyed, 100);
    REQUIRE(segment != nullptr);
    flip_byte(file, segment->offset + segment->compressed_length / 2);
  }
  auto r = CheckpointRestore::open(dir);
  if (!r) {
    CHECK_THAT(r.error(), Catch::Contains(file.string()));
  } else {
    auto damaged = r->keyed("counts", 100);
    REQUIRE_FALSE(damaged);
    CHECK_THAT(damaged.error(), Catch::Contains(file.string()));
    // The other segments of the same file are intact and still read.
    auto intact = r->keyed("counts", 101);
    REQUIRE(intact);
    REQUIRE(intact->has_value());
    CHECK(**intact == keyed_bytes(101));
  }
}

TEST_CASE("a flipped byte in a task file header fails open naming the file", "[checkpoint_restore]") {
  TempDir tmp;
  fs::path dir = write_checkpoint(tmp.path);
  fs::path file = dir / runtime::task_snapshot_file(0, 0);
  flip_byte(file, 20); // within the header, after magic, version and length
  auto r = CheckpointRestore::open(dir);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error(), Catch::Contains(file.string()));
}

TEST_CASE("a missing task file fails open naming it", "[checkpoint_restore]") {
  TempDir tmp;
  fs::path dir = write_checkpoint(tmp.path);
  fs::path file = dir / runtime::task_snapshot_file(0, 1);
  REQUIRE(fs::remove(file));
  auto r = CheckpointRestore::open(dir);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error(), Catch::Contains(file.string()));
}

TEST_CASE("a checkpoint without _metadata is not opened", "[checkpoint_restore]") {
  TempDir tmp;
  fs::path dir = write_checkpoint(tmp.path);
  REQUIRE(fs::remove(dir / runtime::kMetadataFile));
  auto r = CheckpointRestore::open(dir);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error(), Catch::Contains((dir / runtime::kMetadataFile).string()));
}

TEST_CASE("a task file that does not match what _metadata says of it fails open", "[checkpoint_restore]") {
  TempDir tmp;
  fs::path dir = write_checkpoint(tmp.path);
  auto m = runtime::read_metadata(dir);
  REQUIRE(m);
  std::swap(m->tasks[0].file, m->tasks[1].file); // subtask 0 now names subtask 1's file
  REQUIRE(runtime::write_metadata(dir, *m));
  auto r = CheckpointRestore::open(dir);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error(), Catch::Contains("does not match what _metadata says of it"));
}

TEST_CASE("a restore fits a pipeline with the same max_parallelism and nodes", "[checkpoint_restore]") {
  TempDir tmp;
  auto r = CheckpointRestore::open(write_checkpoint(tmp.path));
  REQUIRE(r);
  auto spec = load_spec(pipeline_text("counts", 128));
  CHECK(runtime::check_restore_compatible(*r, spec, false).empty());
}

TEST_CASE("a restore into another max_parallelism is refused even allowing non-restored state",
          "[checkpoint_restore]") {
  TempDir tmp;
  auto r = CheckpointRestore::open(write_checkpoint(tmp.path));
  REQUIRE(r);
  auto spec = load_spec(pipeline_text("counts", 64));
  REQUIRE(spec.max_parallelism == 64);
  for (bool allow : {false, true}) {
    CAPTURE(allow);
    auto problems = runtime::check_restore_compatible(*r, spec, allow);
    REQUIRE(problems.size() == 1);
    CHECK_THAT(problems[0], Catch::Contains("max_parallelism 128"));
    CHECK_THAT(problems[0], Catch::Contains("64"));
  }
}

TEST_CASE("state of a node the pipeline no longer has is refused unless allowed", "[checkpoint_restore]") {
  TempDir tmp;
  auto r = CheckpointRestore::open(write_checkpoint(tmp.path));
  REQUIRE(r);
  auto spec = load_spec(pipeline_text("totals", 128));
  auto problems = runtime::check_restore_compatible(*r, spec, false);
  REQUIRE(problems.size() == 1);
  CHECK_THAT(problems[0], Catch::Contains("'counts'"));
  CHECK_THAT(problems[0], Catch::Contains("--allow-non-restored-state"));
  CHECK(runtime::check_restore_compatible(*r, spec, true).empty());
}

namespace {

// A task file of chain `chain_id` (nodes `nodes`), subtask 0 of 1, in `dir`; its entry.
runtime::CheckpointTaskFile write_task(const fs::path& dir, std::uint32_t chain_id, const std::vector<std::string>& nodes,
                                       std::string file = "") {
  state::SnapshotHeader h;
  h.job_name = "p";
  h.checkpoint_id = 3;
  h.created_at_ms = 1796000000000;
  h.max_parallelism = kMaxParallelism;
  h.chain_id = chain_id;
  h.subtask = 0;
  h.parallelism = 1;
  h.key_groups = state::key_group_range(0, 1, kMaxParallelism);
  h.chain_nodes = nodes;
  if (file.empty()) file = runtime::task_snapshot_file(static_cast<int>(chain_id), 0);
  auto writer = state::SnapshotWriter::create(dir / file, std::move(h));
  REQUIRE(writer);
  auto summary = writer->finish();
  REQUIRE(summary);
  return runtime::CheckpointTaskFile{file, nodes, 0, 1, summary->file_bytes};
}

// Version-1 metadata (no `chains`, no checksum line) of `tasks`, as golden-v1 is written.
void write_v1_metadata(const fs::path& dir, const std::vector<runtime::CheckpointTaskFile>& tasks) {
  std::string text = "format = 'streamctl-checkpoint'\nversion = 1\nkind = 'savepoint'\njob_name = 'p'\n"
                     "job_id = 'p-1'\ncheckpoint_id = 3\ncreated_at = 1796000000000\nmax_parallelism = 128\n";
  for (const auto& t : tasks) {
    text += "[[tasks]]\nfile = '" + t.file + "'\nnodes = [";
    for (const auto& n : t.nodes) text += "'" + n + "',";
    text += "]\nsubtask = " + std::to_string(t.subtask) + "\nparallelism = " + std::to_string(t.parallelism) +
            "\nbytes = " + std::to_string(t.bytes) + "\n";
  }
  write_file(dir / runtime::kMetadataFile, text);
}

} // namespace

// Issue 7, finding 2: `bytes` was not checked against the file.
TEST_CASE("a task file whose size is not the metadata's bytes fails open", "[checkpoint_restore]") {
  TempDir tmp;
  fs::path dir = write_checkpoint(tmp.path);
  auto m = runtime::read_metadata(dir);
  REQUIRE(m);
  m->tasks[1].bytes += 1;
  REQUIRE(runtime::write_metadata(dir, *m));
  auto r = CheckpointRestore::open(dir);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error(), Catch::Contains((dir / m->tasks[1].file).string()));
  CHECK_THAT(r.error(), Catch::Contains("bytes, but _metadata says " + std::to_string(m->tasks[1].bytes)));
}

// Issue 7, finding 2: a version-1 metadata without any entry of a chain looked complete.
TEST_CASE("a chain left out whole is found by the chain ids of the task files", "[checkpoint_restore]") {
  TempDir tmp;
  fs::path dir = tmp.path / "savepoint-x-3";
  fs::create_directories(dir);
  auto a = write_task(dir, 0, {"src"});
  auto b = write_task(dir, 1, {"counts"});
  auto c = write_task(dir, 2, {"out"});

  write_v1_metadata(dir, {a, b, c});
  REQUIRE(CheckpointRestore::open(dir));

  write_v1_metadata(dir, {a, c});
  auto r = CheckpointRestore::open(dir);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error(), Catch::Contains(dir.string() + ": no task file of chain 1"));
  CHECK_THAT(r.error(), Catch::Contains("the snapshot is incomplete"));
}

TEST_CASE("two chains whose files say the same chain id fail open", "[checkpoint_restore]") {
  TempDir tmp;
  fs::path dir = tmp.path / "chk-3";
  fs::create_directories(dir);
  auto a = write_task(dir, 0, {"src"});
  auto b = write_task(dir, 0, {"counts"}, "twin.snap");
  write_v1_metadata(dir, {a, b});
  auto r = CheckpointRestore::open(dir);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error(), Catch::Contains((dir / "twin.snap").string() + ": chain id 0 in its header is also that of"));
}

namespace {

// A keyed operator that decodes nothing: each group's load keeps the bytes, and install
// files them, so that a test sees which groups arrived, in what order and with what bytes.
class GroupCollector final : public operators::Operator {
public:
  void process(const state::Batch&, state::Batch&) override {}
  bool has_state() const override { return true; }
  Result<void> restore_key_group(std::uint32_t group, std::string_view data) override {
    installed.emplace_back(group, std::string(data));
    return {};
  }
  class Load final : public KeyGroupLoad {
  public:
    Load(GroupCollector& self, std::uint32_t group, std::string bytes)
        : self_(self), group_(group), bytes_(std::move(bytes)) {}
    Result<void> install() override { return self_.restore_key_group(group_, bytes_); }

  private:
    GroupCollector& self_;
    std::uint32_t group_;
    std::string bytes_;
  };
  Result<std::unique_ptr<KeyGroupLoad>> load_key_group(std::uint32_t group, std::string_view data) const override {
    if (refuse && group == *refuse) return fail("refused");
    return std::unique_ptr<KeyGroupLoad>(
        std::make_unique<Load>(const_cast<GroupCollector&>(*this), group, std::string(data)));
  }
  std::vector<std::pair<std::uint32_t, std::string>> installed;
  std::optional<std::uint32_t> refuse;
};

} // namespace

TEST_CASE("restore_key_groups installs every group with state, in order, from whichever file holds it",
          "[checkpoint_restore]") {
  TempDir tmp;
  auto r = CheckpointRestore::open(write_checkpoint(tmp.path));
  REQUIRE(r);
  GroupCollector op;
  const state::KeyGroupRange range{40, 90}; // across the two old subtasks' files
  REQUIRE(runtime::restore_key_groups(*r, "counts", range, op));
  std::vector<std::pair<std::uint32_t, std::string>> expected;
  for (std::uint32_t kg = range.first; kg < range.end; ++kg)
    if (has_state(kg)) expected.emplace_back(kg, keyed_bytes(kg));
  CHECK(op.installed == expected);
}

TEST_CASE("restore_key_groups fails with the first failing group in group order", "[checkpoint_restore]") {
  TempDir tmp;
  fs::path dir = write_checkpoint(tmp.path);
  fs::path file = dir / runtime::task_snapshot_file(0, 1);
  {
    auto reader = state::SnapshotReader::open(file);
    REQUIRE(reader);
    const state::SegmentInfo* segment = reader->find("counts", state::SegmentKind::Keyed, 100);
    REQUIRE(segment != nullptr);
    flip_byte(file, segment->offset + segment->compressed_length / 2);
  }
  auto r = CheckpointRestore::open(dir);
  REQUIRE(r);
  auto sequential = r->keyed("counts", 100);
  REQUIRE_FALSE(sequential);
  GroupCollector damaged;
  auto failed = runtime::restore_key_groups(*r, "counts", {64, 128}, damaged);
  REQUIRE_FALSE(failed);
  CHECK(failed.error() == sequential.error()); // the message of a one-by-one restore
  for (const auto& installed : damaged.installed) CHECK(installed.first < 100);

  GroupCollector refusing;
  refusing.refuse = 97; // before the damaged group: its failure is the one reported
  auto refused = runtime::restore_key_groups(*r, "counts", {64, 128}, refusing);
  REQUIRE_FALSE(refused);
  CHECK(refused.error() == "key group 97: refused");
}

namespace {

// A keyed operator that restores on the task thread (no load), slowly, and notes how many
// groups the helpers had read beyond the ones it installed.
class SlowInstaller final : public operators::Operator {
public:
  void process(const state::Batch&, state::Batch&) override {}
  bool has_state() const override { return true; }
  Result<std::unique_ptr<KeyGroupLoad>> load_key_group(std::uint32_t, std::string_view) const override {
    const std::size_t ahead = ++read_ - installed_;
    for (std::size_t seen = most_ahead_; ahead > seen && !most_ahead_.compare_exchange_weak(seen, ahead);) {
    }
    return std::unique_ptr<KeyGroupLoad>{};
  }
  Result<void> restore_key_group(std::uint32_t, std::string_view) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ++installed_;
    return {};
  }
  std::size_t installed() const { return installed_; }
  std::size_t most_ahead() const { return most_ahead_; }

private:
  mutable std::atomic<std::size_t> read_{0};
  mutable std::atomic<std::size_t> most_ahead_{0};
  std::atomic<std::size_t> installed_{0};
};

} // namespace

TEST_CASE("restore_key_groups reads at most a few groups ahead of a slow install", "[checkpoint_restore]") {
  TempDir tmp;
  auto r = CheckpointRestore::open(write_checkpoint(tmp.path));
  REQUIRE(r);
  SlowInstaller op;
  REQUIRE(runtime::restore_key_groups(*r, "counts", {0, 128}, op));
  std::size_t groups = 0;
  for (std::uint32_t kg = 0; kg < 128; ++kg) groups += has_state(kg) ? 1 : 0;
  CHECK(op.installed() == groups);
  const std::size_t helpers = std::max(1u, std::thread::hardware_concurrency());
  INFO(helpers << " helpers");
  // Unbounded, the helpers read all 85 groups while the first few are installed.
  CHECK(op.most_ahead() <= 4 * helpers + 1);
}
