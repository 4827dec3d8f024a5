// Incremental checkpoints: _metadata version 3 with `previous` files (checkpoint_metadata),
// a task's state read across its files (checkpoint_restore: the newest keyed segment of a
// group decides, an empty one means nothing), a missing earlier file refused naming it and the
// checkpoint, pruning that keeps what retained checkpoints build on, and the task's plan of
// what to write (incremental_snapshots).
#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "pipeline/runtime/checkpoint_metadata.hpp"
#include "pipeline/runtime/checkpoint_restore.hpp"
#include "pipeline/runtime/incremental_snapshots.hpp"
#include "pipeline/spec/snapshot_mode.hpp"
#include "state/snapshot_format.hpp"
#include "unit/temp_dir.hpp"

using namespace streamctl;
using runtime::CheckpointTaskFile;
using streamctl::testing::TempDir;
namespace fs = std::filesystem;

namespace {

constexpr std::uint32_t kMaxParallelism = 8;
const std::vector<std::string> kChain = {"src", "counts"};

// Keyed segments of "counts" by key group; an empty string is an empty segment.
using Groups = std::map<std::uint32_t, std::string>;

// Writes root/chk-ID/chain-0-subtask-0.snap (parallelism 1) holding `groups` and the source
// position "pos-ID"; returns its size.
std::uint64_t write_task_file(const fs::path& root, std::uint64_t id, const Groups& groups) {
  fs::path dir = root / ("chk-" + std::to_string(id));
  fs::create_directories(dir);
  state::SnapshotHeader h;
  h.job_name = "p";
  h.checkpoint_id = id;
  h.created_at_ms = 1796000000000 + static_cast<std::int64_t>(id);
  h.max_parallelism = kMaxParallelism;
  h.key_groups = state::key_group_range(0, 1, kMaxParallelism);
  h.chain_nodes = kChain;
  auto writer = state::SnapshotWriter::create(dir / runtime::task_snapshot_file(0, 0), std::move(h));
  REQUIRE(writer);
  REQUIRE(writer->add_segment("src", state::SegmentKind::SourcePosition, state::no_key_group,
                              "pos-" + std::to_string(id)));
  for (const auto& [group, bytes] : groups)
    REQUIRE(writer->add_segment("counts", state::SegmentKind::Keyed, group, bytes));
  auto summary = writer->finish();
  REQUIRE(summary);
  return summary->file_bytes;
}

runtime::CheckpointMetadata metadata_of(std::uint64_t id, std::uint64_t bytes,
                                        std::vector<CheckpointTaskFile::PreviousFile> previous) {
  runtime::CheckpointMetadata m;
  m.job_name = "p";
  m.job_id = "p-1";
  m.checkpoint_id = id;
  m.created_at_ms = 1796000000000 + static_cast<std::int64_t>(id);
  m.max_parallelism = static_cast<int>(kMaxParallelism);
  CheckpointTaskFile task{runtime::task_snapshot_file(0, 0), kChain, 0, 1, bytes};
  task.previous = std::move(previous);
  m.tasks.push_back(std::move(task));
  return m;
}

// chk-3 full (groups 1, 2, 4), chk-4 a delta (group 1 rewritten, group 2 emptied, group 5
// new) building on it.
fs::path write_chain(const fs::path& root) {
  std::uint64_t full = write_task_file(root, 3, {{1, "one@3"}, {2, "two@3"}, {4, "four@3"}});
  REQUIRE(runtime::write_metadata(root / "chk-3", metadata_of(3, full, {})));
  std::uint64_t delta = write_task_file(root, 4, {{1, "one@4"}, {2, ""}, {5, "five@4"}});
  REQUIRE(runtime::write_metadata(root / "chk-4",
                                  metadata_of(4, delta, {{"../chk-3/chain-0-subtask-0.snap", full}})));
  return root / "chk-4";
}

// An operator whose changed key groups a test sets.
class TrackedOperator : public operators::Operator {
public:
  explicit TrackedOperator(bool tracks) : tracks_(tracks) {}
  void process(const state::Batch&, state::Batch&) override {}
  bool take_changed_key_groups(std::vector<std::uint32_t>& out) override {
    out.insert(out.end(), changed.begin(), changed.end());
    changed.clear();
    return tracks_;
  }
  std::vector<std::uint32_t> changed;

private:
  bool tracks_;
};

} // namespace

TEST_CASE("metadata with previous files is version 3 and reads back the same", "[incremental]") {
  TempDir tmp;
  fs::path chk = write_chain(tmp.path);
  auto m = runtime::read_metadata(chk);
  INFO((m ? "" : m.error()));
  REQUIRE(m);
  CHECK(m->version == 3);
  REQUIRE(m->tasks.size() == 1);
  CHECK(m->tasks[0].previous ==
        std::vector<CheckpointTaskFile::PreviousFile>{{"../chk-3/chain-0-subtask-0.snap", m->tasks[0].previous[0].bytes}});
  auto full = runtime::read_metadata(tmp.path / "chk-3");
  REQUIRE(full);
  CHECK(full->version == 2); // a full checkpoint stays readable by the previous release
}

TEST_CASE("previous files that lead out of the job's checkpoints or back in time are refused", "[incremental]") {
  TempDir tmp;
  for (std::string bad : {"../../etc/passwd", "chk-3/chain-0-subtask-0.snap", "../chk-3/../chk-2/chain-0-subtask-0.snap",
                          "../chk-9/chain-0-subtask-0.snap", "../chk-3/_metadata", "../savepoint-x-3/chain-0-subtask-0.snap"}) {
    INFO(bad);
    fs::remove_all(tmp.path / "chk-4");
    fs::create_directories(tmp.path / "chk-4");
    REQUIRE(runtime::write_metadata(tmp.path / "chk-4", metadata_of(4, 10, {{bad, 10}})));
    auto m = runtime::read_metadata(tmp.path / "chk-4");
    REQUIRE_FALSE(m);
    CHECK_THAT(m.error(), Catch::Contains("previous file"));
  }
}

TEST_CASE("a savepoint with previous files is refused: savepoints are self-contained", "[incremental]") {
  TempDir tmp;
  fs::create_directories(tmp.path / "savepoint-1");
  auto m = metadata_of(4, 10, {{"../chk-3/chain-0-subtask-0.snap", 10}});
  m.kind = "savepoint";
  REQUIRE(runtime::write_metadata(tmp.path / "savepoint-1", m));
  auto read = runtime::read_metadata(tmp.path / "savepoint-1");
  REQUIRE_FALSE(read);
  CHECK_THAT(read.error(), Catch::Contains("a savepoint with previous files"));
}

TEST_CASE("a task's state is read across its files: the newest segment of a group decides", "[incremental]") {
  TempDir tmp;
  auto restore = runtime::CheckpointRestore::open(write_chain(tmp.path));
  INFO((restore ? "" : restore.error()));
  REQUIRE(restore);
  auto group = [&](std::uint32_t g) {
    auto bytes = restore->keyed("counts", g);
    REQUIRE(bytes);
    return *bytes;
  };
  CHECK(group(1) == std::optional<std::string>("one@4"));  // rewritten by the delta
  CHECK(group(2) == std::nullopt);                          // emptied by the delta
  CHECK(group(4) == std::optional<std::string>("four@3")); // only in the full one
  CHECK(group(5) == std::optional<std::string>("five@4"));  // new in the delta
  CHECK(group(0) == std::nullopt);
  std::vector<std::uint32_t> listed;
  for (const auto& s : restore->keyed_segments("counts", {0, kMaxParallelism})) listed.push_back(s.key_group);
  CHECK(listed == std::vector<std::uint32_t>{1, 4, 5});
  auto positions = restore->per_subtask("src", state::SegmentKind::SourcePosition);
  REQUIRE(positions);
  CHECK(*positions == std::vector<std::string>{"pos-4"}); // from the newest file alone
  CHECK(restore->verify());
}

TEST_CASE("a missing earlier file is refused naming it and the checkpoint that needs it", "[incremental]") {
  TempDir tmp;
  fs::path chk = write_chain(tmp.path);
  fs::remove(tmp.path / "chk-3" / "chain-0-subtask-0.snap");
  auto restore = runtime::CheckpointRestore::open(chk);
  REQUIRE_FALSE(restore);
  CHECK_THAT(restore.error(), Catch::Contains("chk-3/chain-0-subtask-0.snap: missing") &&
                                  Catch::Contains("checkpoint " + chk.string() + " builds on it"));
}

TEST_CASE("an earlier file replaced by another task's or checkpoint's is refused", "[incremental]") {
  TempDir tmp;
  fs::path chk = write_chain(tmp.path);
  // chk-3's file rewritten as checkpoint 2's: the header says another checkpoint.
  fs::remove_all(tmp.path / "chk-3");
  std::uint64_t size = write_task_file(tmp.path, 2, {{1, "one@3"}, {2, "two@3"}, {4, "four@3"}});
  fs::rename(tmp.path / "chk-2", tmp.path / "chk-3");
  auto restore = runtime::CheckpointRestore::open(chk);
  REQUIRE_FALSE(restore);
  CHECK_THAT(restore.error(), Catch::Contains("is not the earlier file") || Catch::Contains(std::to_string(size) + " bytes"));
}

TEST_CASE("pruning keeps the files a retained checkpoint builds on, and only those", "[incremental]") {
  TempDir tmp;
  write_chain(tmp.path);
  auto problems = runtime::prune_checkpoints(tmp.path, 1, std::nullopt);
  CHECK(problems.empty());
  // chk-3 is no longer a checkpoint of its own, but chk-4 still restores.
  CHECK_FALSE(fs::exists(tmp.path / "chk-3" / runtime::kMetadataFile));
  CHECK(fs::exists(tmp.path / "chk-3" / "chain-0-subtask-0.snap"));
  CHECK(runtime::CheckpointRestore::open(tmp.path / "chk-4"));
  CHECK(runtime::completed_checkpoints(tmp.path) == std::vector<fs::path>{tmp.path / "chk-4"});
  // A full chk-5: nothing builds on chk-3 or chk-4 any more.
  std::uint64_t full = write_task_file(tmp.path, 5, {{1, "one@5"}});
  REQUIRE(runtime::write_metadata(tmp.path / "chk-5", metadata_of(5, full, {})));
  CHECK(runtime::prune_checkpoints(tmp.path, 1, std::nullopt).empty());
  CHECK_FALSE(fs::exists(tmp.path / "chk-3"));
  CHECK_FALSE(fs::exists(tmp.path / "chk-4"));
  CHECK(runtime::CheckpointRestore::open(tmp.path / "chk-5"));
}

TEST_CASE("previous files travel in an ACK and come back the same; damage is refused", "[incremental]") {
  std::vector<CheckpointTaskFile::PreviousFile> files{{"../chk-3/chain-0-subtask-1.snap", 1200},
                                                      {"../chk-12/chain-0-subtask-1.snap", 0}};
  CHECK(runtime::decode_previous_files(runtime::encode_previous_files(files)) == files);
  CHECK(runtime::decode_previous_files("") == std::vector<CheckpointTaskFile::PreviousFile>{});
  CHECK_FALSE(runtime::decode_previous_files("12 ../chk-3/chain-0-subtask-1.snap"));   // no line end
  CHECK_FALSE(runtime::decode_previous_files("x ../chk-3/chain-0-subtask-1.snap\n"));  // not a size
  CHECK_FALSE(runtime::decode_previous_files("12 /etc/passwd\n"));                      // not a task file
}

TEST_CASE("a task plans full snapshots until a checkpoint of its own completes, then deltas", "[incremental]") {
  runtime::IncrementalSnapshots snapshots({.enabled = true, .full_every = 3}, "chain-0-subtask-0.snap");
  TrackedOperator tracked(true), untracked(false);
  std::vector<operators::Operator*> ops{&tracked, &untracked};
  const fs::path root = "/ck/job";

  tracked.changed = {1, 2};
  auto p1 = snapshots.plan(1, root / "chk-1", false, ops);
  CHECK_FALSE(p1.incremental()); // no base yet
  snapshots.written(1, 100);
  snapshots.completed(1);

  tracked.changed = {2, 3};
  auto p2 = snapshots.plan(2, root / "chk-2", false, ops);
  REQUIRE(p2.incremental());
  CHECK(p2.previous == std::vector<CheckpointTaskFile::PreviousFile>{{"../chk-1/chain-0-subtask-0.snap", 100}});
  CHECK(p2.groups[0] == std::optional<std::vector<std::uint32_t>>({2, 3}));
  CHECK(p2.groups[1] == std::nullopt); // an operator that does not track writes every group
  snapshots.written(2, 10);
  // Checkpoint 2 fails; a savepoint (3) comes; what changed at 2 and 3 is written again at 4.
  tracked.changed = {5};
  auto p3 = snapshots.plan(3, root / "savepoint-20261202-3", true, ops);
  CHECK_FALSE(p3.incremental()); // savepoints are full
  snapshots.written(3, 120);
  snapshots.completed(3); // a savepoint is never a base
  tracked.changed = {7};
  auto p4 = snapshots.plan(4, root / "chk-4", false, ops);
  REQUIRE(p4.incremental());
  CHECK(p4.previous.size() == 1); // still on checkpoint 1
  CHECK(p4.groups[0] == std::optional<std::vector<std::uint32_t>>({2, 3, 5, 7}));
  snapshots.written(4, 20);
  snapshots.completed(4);

  auto p5 = snapshots.plan(5, root / "chk-5", false, ops);
  REQUIRE(p5.incremental());
  CHECK(p5.previous == std::vector<CheckpointTaskFile::PreviousFile>{{"../chk-1/chain-0-subtask-0.snap", 100},
                                                                     {"../chk-4/chain-0-subtask-0.snap", 20}});
  CHECK(p5.groups[0] == std::optional<std::vector<std::uint32_t>>(std::vector<std::uint32_t>{}));
  snapshots.written(5, 20);
  snapshots.completed(5);
  // Three files in the chain: full_every = 3 makes the next one full.
  CHECK_FALSE(snapshots.plan(6, root / "chk-6", false, ops).incremental());
}

TEST_CASE("a chain of deltas larger than its full snapshot ends with a full one", "[incremental]") {
  runtime::IncrementalSnapshots snapshots({.enabled = true, .full_every = 100}, "chain-0-subtask-0.snap");
  TrackedOperator tracked(true);
  std::vector<operators::Operator*> ops{&tracked};
  snapshots.plan(1, "/ck/chk-1", false, ops);
  snapshots.written(1, 100);
  snapshots.completed(1);
  REQUIRE(snapshots.plan(2, "/ck/chk-2", false, ops).incremental());
  snapshots.written(2, 101);
  snapshots.completed(2);
  CHECK_FALSE(snapshots.plan(3, "/ck/chk-3", false, ops).incremental());
}

TEST_CASE("with incremental off every snapshot is full", "[incremental]") {
  runtime::IncrementalSnapshots snapshots({.enabled = false, .full_every = 10}, "chain-0-subtask-0.snap");
  TrackedOperator tracked(true);
  std::vector<operators::Operator*> ops{&tracked};
  for (std::uint64_t id = 1; id < 4; ++id) {
    CHECK_FALSE(snapshots.plan(id, "/ck/chk-" + std::to_string(id), false, ops).incremental());
    snapshots.written(id, 100);
    snapshots.completed(id);
  }
}

namespace {

// An operator whose changed groups and entries a test sets (entries: group -> keys).
class EntryTrackedOperator : public operators::Operator {
public:
  void process(const state::Batch&, state::Batch&) override {}
  bool take_changed_key_groups(std::vector<std::uint32_t>& out) override {
    for (const auto& [g, keys] : entries) out.push_back(g);
    out.insert(out.end(), whole.begin(), whole.end());
    return true;
  }
  bool take_changed_entries(std::vector<state::GroupEntries>& out, bool /*deferred*/) override {
    for (auto& [g, keys] : entries) out.push_back({g, keys});
    entries.clear();
    whole.clear();
    return true;
  }
  std::map<std::uint32_t, std::vector<std::string>> entries;
  std::vector<std::uint32_t> whole; // changed, entries not known
};

using Deltas = std::map<std::uint32_t, std::vector<std::string>>;

} // namespace

TEST_CASE("a task plans deltas of the entries changed since its base, failed checkpoints included",
          "[incremental][delta]") {
  runtime::IncrementalSnapshots snapshots({.enabled = true, .full_every = 10}, "chain-0-subtask-0.snap");
  EntryTrackedOperator op;
  std::vector<operators::Operator*> ops{&op};
  const fs::path root = "/ck/job";

  op.entries = {{1, {"a"}}};
  CHECK_FALSE(snapshots.plan(1, root / "chk-1", false, ops).incremental());
  snapshots.written(1, 1000);
  snapshots.completed(1);

  // Checkpoint 2 takes b and c in group 1 and d in group 2, then fails.
  op.entries = {{1, {"c", "b"}}, {2, {"d"}}};
  auto p2 = snapshots.plan(2, root / "chk-2", false, ops);
  REQUIRE(p2.incremental());
  // One take's keys as the operator gave them (each once already): not sorted again.
  CHECK(p2.deltas[0] == Deltas{{1, {"c", "b"}}, {2, {"d"}}});
  snapshots.written(2, 10);

  // Checkpoint 3 writes what 2 took as well, each key once; group 3 changed without its
  // entries (a restore, or too many): written whole.
  op.entries = {{1, {"b", "e"}}};
  op.whole = {3};
  auto p3 = snapshots.plan(3, root / "chk-3", false, ops);
  REQUIRE(p3.incremental());
  CHECK(p3.groups[0] == std::optional<std::vector<std::uint32_t>>({1, 2, 3}));
  CHECK(p3.deltas[0] == Deltas{{1, {"b", "c", "e"}}, {2, {"d"}}});
  snapshots.written(3, 12);
  snapshots.completed(3);

  // After 3 completes, only what changed since it.
  op.entries = {{2, {"f"}}};
  auto p4 = snapshots.plan(4, root / "chk-4", false, ops);
  REQUIRE(p4.incremental());
  CHECK(p4.previous.size() == 2);
  CHECK(p4.deltas[0] == Deltas{{2, {"f"}}});
  snapshots.written(4, 12);
  snapshots.completed(4);

  // Group 2 taken whole at 5, which fails; with entries at 6: still whole, since the base
  // is 4 and 5's changes of it are known only as a whole.
  op.whole = {2};
  auto p5 = snapshots.plan(5, root / "chk-5", false, ops);
  REQUIRE(p5.incremental());
  CHECK(p5.deltas[0].empty());
  snapshots.written(5, 12);
  op.entries = {{2, {"g"}}};
  auto p6 = snapshots.plan(6, root / "chk-6", false, ops);
  CHECK(p6.deltas[0].empty()); // 5, not completed, took group 2 whole: whole until a base follows
  CHECK(p6.groups[0] == std::optional<std::vector<std::uint32_t>>(std::vector<std::uint32_t>{2}));
}

TEST_CASE("with incremental off no entries are taken", "[incremental][delta]") {
  runtime::IncrementalSnapshots snapshots({.enabled = false, .full_every = 10}, "chain-0-subtask-0.snap");
  EntryTrackedOperator op;
  std::vector<operators::Operator*> ops{&op};
  op.entries = {{1, {"a"}}};
  snapshots.plan(1, "/ck/chk-1", false, ops);
  CHECK(op.entries.size() == 1); // not taken: the operator does not start tracking
}

namespace {

std::vector<CheckpointTaskFile::PreviousFile> chain_of(std::initializer_list<std::uint64_t> ids) {
  std::vector<CheckpointTaskFile::PreviousFile> out;
  for (std::uint64_t id : ids) out.push_back({"../chk-" + std::to_string(id) + "/chain-0-subtask-0.snap", 100 + id});
  return out;
}

using Planned = std::optional<std::vector<std::uint32_t>>; // Plan::groups of one operator

} // namespace

TEST_CASE("rolling wholes: each checkpoint writes the slice whose whole copy is oldest, and older files leave the chain",
          "[incremental][rolling]") {
  // Groups 10..17 in 3 slices: {10, 13, 16}, {11, 14, 17}, {12, 15}.
  runtime::IncrementalSnapshots snapshots({.enabled = true, .full_every = 3, .rolling = true},
                                          "chain-0-subtask-0.snap", state::KeyGroupRange{10, 18});
  EntryTrackedOperator op;
  TrackedOperator untracked(false);
  std::vector<operators::Operator*> ops{&op, &untracked};
  const fs::path root = "/ck/job";
  auto step = [&](std::uint64_t id, bool complete) {
    auto p = snapshots.plan(id, root / ("chk-" + std::to_string(id)), false, ops);
    snapshots.written(id, 100 + id);
    if (complete) snapshots.completed(id);
    return p;
  };

  CHECK_FALSE(step(1, true).incremental()); // the first is full: every slice whole at 1

  op.entries = {{13, {"a"}}, {14, {"b"}}};
  auto p2 = step(2, true);
  REQUIRE(p2.incremental());
  CHECK(p2.previous == chain_of({1}));
  CHECK(p2.groups[0] == Planned({10, 13, 14, 16})); // slice 0 whole, and the changed group 14
  CHECK(p2.deltas[0] == Deltas{{14, {"b"}}});       // 13 is in the slice: whole, not a delta
  CHECK(p2.groups[1] == std::nullopt);              // an untracked operator writes every group

  auto p3 = step(3, true);
  CHECK(p3.previous == chain_of({1, 2}));
  CHECK(p3.groups[0] == Planned({11, 14, 17}));

  // Slice 2 at 4: every slice now has a whole copy at 2 or later, so chk-1 leaves the chain.
  op.entries = {{10, {"c"}}};
  auto p4 = step(4, true);
  CHECK(p4.previous == chain_of({2, 3}));
  CHECK(p4.groups[0] == Planned({10, 12, 15}));
  CHECK(p4.deltas[0] == Deltas{{10, {"c"}}});

  // 5 (slice 0) fails: it covered nothing, so 6 writes slice 0 again, and 5's changes with it.
  op.entries = {{11, {"d"}}};
  auto p5 = step(5, false);
  CHECK(p5.previous == chain_of({3, 4}));
  CHECK(p5.groups[0] == Planned({10, 11, 13, 16}));
  op.entries = {{12, {"e"}}};
  auto p6 = step(6, true);
  CHECK(p6.previous == chain_of({3, 4}));
  CHECK(p6.groups[0] == Planned({10, 11, 12, 13, 16}));
  CHECK(p6.deltas[0] == Deltas{{11, {"d"}}, {12, {"e"}}});

  auto p7 = step(7, true);
  CHECK(p7.previous == chain_of({4, 6}));
  CHECK(p7.groups[0] == Planned({11, 14, 17}));
  // The chain never reaches full_every files, so no later checkpoint is full.
  for (std::uint64_t id = 8; id < 40; ++id) {
    auto p = step(id, id % 5 != 0);
    REQUIRE(p.incremental());
    CHECK(p.previous.size() <= 2);
  }
}

TEST_CASE("rolling off, or no key groups to deal: full checkpoints every full_every as before",
          "[incremental][rolling]") {
  for (bool rolling : {false, true}) {
    INFO("rolling " << rolling);
    runtime::IncrementalSnapshots snapshots({.enabled = true, .full_every = 3, .rolling = rolling},
                                            "chain-0-subtask-0.snap",
                                            rolling ? state::KeyGroupRange{} : state::KeyGroupRange{0, 8});
    TrackedOperator op(true);
    std::vector<operators::Operator*> ops{&op};
    std::vector<bool> incremental;
    for (std::uint64_t id = 1; id <= 7; ++id) {
      auto p = snapshots.plan(id, "/ck/chk-" + std::to_string(id), false, ops);
      incremental.push_back(p.incremental());
      if (p.incremental()) CHECK(p.groups[0] == Planned(std::vector<std::uint32_t>{}));
      snapshots.written(id, 10);
      snapshots.completed(id);
    }
    CHECK(incremental == std::vector<bool>{false, true, true, false, true, true, false});
  }
}

TEST_CASE("a task restored from its own chain goes on with it, when each slice has a whole copy there",
          "[incremental][rolling][restored]") {
  // Groups 0..5 in 3 slices: {0, 3}, {1, 4}, {2, 5}. The restored chain: chk-4 holds every
  // group whole, chk-5 slice 1, chk-6 (the restored checkpoint's own file) slice 2.
  const fs::path root = "/ck/job";
  const std::vector<std::set<std::uint32_t>> whole_in{{0, 1, 2, 3, 4, 5}, {1, 4}, {2, 5}};
  auto holds_whole = [&](std::size_t f, std::uint32_t g) { return whole_in[f].count(g) > 0; };
  auto make = [](bool rolling) {
    return runtime::IncrementalSnapshots({.enabled = true, .full_every = 3, .rolling = rolling},
                                         "chain-0-subtask-0.snap", state::KeyGroupRange{0, 6});
  };
  EntryTrackedOperator op;
  std::vector<operators::Operator*> ops{&op};

  SECTION("the next checkpoint rolls on from it") {
    auto snapshots = make(true);
    REQUIRE(snapshots.continue_restored(root, 6, chain_of({4, 5, 6}), holds_whole));
    op.entries = {{4, {"k"}}};
    auto p7 = snapshots.plan(7, root / "chk-7", false, ops);
    REQUIRE(p7.incremental());
    CHECK(p7.previous == chain_of({5, 6})); // slice 0 rolls: chk-4 leaves the chain
    CHECK(p7.groups[0] == Planned({0, 3, 4}));
    CHECK(p7.deltas[0] == Deltas{{4, {"k"}}});
  }
  SECTION("a savepoint first is full, and the checkpoint after it still goes on with the chain") {
    auto snapshots = make(true);
    REQUIRE(snapshots.continue_restored(root, 6, chain_of({4, 5, 6}), holds_whole));
    CHECK_FALSE(snapshots.plan(7, root / "savepoint-20261204-7", true, ops).incremental());
    snapshots.written(7, 500);
    snapshots.completed(7);
    CHECK(snapshots.plan(8, root / "chk-8", false, ops).previous == chain_of({5, 6}));
  }
  SECTION("a slice without a whole copy in the chain: full") {
    auto snapshots = make(true);
    auto only_later = [&](std::size_t f, std::uint32_t g) { return f > 0 && holds_whole(f, g); };
    CHECK_FALSE(snapshots.continue_restored(root, 6, chain_of({4, 5, 6}), only_later));
    CHECK_FALSE(snapshots.plan(7, root / "chk-7", false, ops).incremental());
  }
  SECTION("checkpoints into another directory: full (the chain's paths are relative to its own)") {
    auto snapshots = make(true);
    REQUIRE(snapshots.continue_restored(root, 6, chain_of({4, 5, 6}), holds_whole));
    CHECK_FALSE(snapshots.plan(7, "/elsewhere/job/chk-7", false, ops).incremental());
  }
  SECTION("without rolling the chain, begun by a full snapshot, is the base as it is") {
    auto snapshots = make(false);
    const std::vector<CheckpointTaskFile::PreviousFile> chain{{"../chk-5/chain-0-subtask-0.snap", 1000},
                                                              {"../chk-6/chain-0-subtask-0.snap", 10}};
    REQUIRE(snapshots.continue_restored(root, 6, chain, [](std::size_t, std::uint32_t) { return false; }));
    auto p7 = snapshots.plan(7, root / "chk-7", false, ops);
    CHECK(p7.previous == chain);
    snapshots.written(7, 10);
    snapshots.completed(7);
    CHECK_FALSE(snapshots.plan(8, root / "chk-8", false, ops).incremental()); // 3 files: full_every
  }
  SECTION("incremental off, or a chain longer than full_every: full") {
    runtime::IncrementalSnapshots off({.enabled = false, .full_every = 3}, "chain-0-subtask-0.snap",
                                      state::KeyGroupRange{0, 6});
    CHECK_FALSE(off.continue_restored(root, 6, chain_of({4, 5, 6}), holds_whole));
    auto snapshots = make(true);
    CHECK_FALSE(snapshots.continue_restored(root, 6, chain_of({3, 4, 5, 6}), holds_whole));
  }
}

// The defaults that streamctl-pipeline(5) documents (since December 2026: rolling wholes and
// deferred snapshots, which together keep a checkpoint of a large state from holding the task),
// and that a pipeline can still turn off.
TEST_CASE("checkpoints are incremental and rolling and deferred unless the pipeline says otherwise",
          "[incremental]") {
  const auto spec_of = [](const std::string& text) {
    pipeline::PipelineSpec spec;
    spec.root = toml::parse(text, std::string_view("job.toml"));
    return spec;
  };
  auto defaults = spec_of("[checkpoint]\ninterval = \"1s\"\n");
  const auto d = runtime::incremental_settings_of(defaults);
  CHECK(d.enabled);
  CHECK(d.rolling);
  CHECK(d.full_every == 10);
  CHECK(pipeline::deferred_snapshots_of(defaults));
  CHECK_FALSE(pipeline::fork_snapshots_of(defaults));

  auto off = spec_of("[checkpoint]\nincremental = false\nrolling = false\nsnapshot = \"copy\"\n");
  const auto o = runtime::incremental_settings_of(off);
  CHECK_FALSE(o.enabled);
  CHECK_FALSE(o.rolling);
  CHECK_FALSE(pipeline::deferred_snapshots_of(off));
  CHECK_FALSE(pipeline::fork_snapshots_of(off));
  CHECK(pipeline::fork_snapshots_of(spec_of("[checkpoint]\nsnapshot = \"fork\"\n")));
}
