// Spool files are deleted once nothing needs them (issue 7, finding 4: every checkpointed stdin
// run left a copy of its whole input in CHECKPOINT_DIR/NAME/spool, 1.15 GB after 20 restarts).

#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>

#include "pipeline/runtime/checkpoint_metadata.hpp"
#include "pipeline/runtime/metadata_checksum.hpp"
#include "pipeline/runtime/spool_janitor.hpp"
#include "unit/temp_dir.hpp"

using streamctl::runtime::CheckpointMetadata;
using streamctl::runtime::CheckpointTaskFile;
using streamctl::runtime::SpoolJanitor;
using Stage = SpoolJanitor::Stage;
namespace fs = std::filesystem;

namespace {

void snapshot_listing(const fs::path& dir, std::vector<std::string> spool_files, std::uint64_t id) {
  fs::create_directories(dir);
  CheckpointMetadata m;
  m.job_name = "j";
  m.checkpoint_id = id;
  CheckpointTaskFile source{"chain-0-subtask-0.snap", {"in", "ok"}, 0, 1, 10, std::move(spool_files)};
  CheckpointTaskFile other{"chain-1-subtask-0.snap", {"sum"}, 0, 1, 10, {}};
  m.tasks = {source, other};
  REQUIRE(streamctl::runtime::write_metadata(dir, m).ok());
}

std::vector<std::string> listing(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace

TEST_CASE("the spool janitor keeps what snapshots and the live run need, and nothing else", "[spool]") {
  streamctl::testing::TempDir tmp;
  fs::path root = tmp.path / "j";
  auto log = std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::null_sink_mt>());
  SpoolJanitor janitor(root, "j-20260101-000000-ab12", *log);
  const std::string run = "stdin-in.j-20260101-000000-ab12.spool";
  const std::string run_copy = "stdin-in.j-20260101-000000-ab12.0123456789abcdef.spool";
  const std::string in_checkpoint = "stdin-in.j-20251231-000000-cd34.spool";
  const std::string in_savepoint = "stdin-in.j-20251230-000000-ef56.spool";
  const std::string in_restore_source = "stdin-in.j-20251229-000000-0000.spool";
  const std::string pruned = "stdin-in.j-20251228-000000-1111.spool";
  const std::string older_release = "stdin-in-0123456789abcdef.spool";
  const std::string temporary = run_copy + ".tmp";
  // A stdout sink's: the janitor leaves it to the sink until the job has drained.
  const std::string pending = "stdout-out-0123456789abcdef.pending";
  fs::create_directories(janitor.dir());
  for (const auto& name : {run, run_copy, in_checkpoint, in_savepoint, in_restore_source, pruned, older_release,
                           temporary, pending})
    std::ofstream(janitor.dir() / name) << "x\n";
  snapshot_listing(root / "chk-7", {in_checkpoint, run}, 7);
  snapshot_listing(root / "savepoint-20251230-000000-3", {in_savepoint}, 3);
  fs::create_directories(root / "chk-8"); // incomplete: its files are not listed anywhere yet
  snapshot_listing(tmp.path / "elsewhere" / "savepoint-x", {in_restore_source}, 2);

  // Live: the run's own files, what retained snapshots and the restore source list, and files
  // of older releases stay.
  CHECK(janitor.unneeded(Stage::Live, tmp.path / "elsewhere" / "savepoint-x") ==
        std::vector<std::string>{pruned, temporary});
  CHECK(janitor.unneeded(Stage::Live) == std::vector<std::string>{pruned, in_restore_source, temporary});
  // Ended without draining: only what snapshots under the root list (and older releases').
  CHECK(janitor.unneeded(Stage::Ended) ==
        std::vector<std::string>{pruned, in_restore_source, run_copy, temporary});
  janitor.sweep_ended();
  CHECK(listing(janitor.dir()) == std::vector<std::string>{older_release, in_savepoint, in_checkpoint, run, pending});
  // Once the checkpoint is pruned, the files only it listed go.
  fs::remove_all(root / "chk-7");
  janitor.sweep_live({});
  CHECK(listing(janitor.dir()) == std::vector<std::string>{older_release, in_savepoint, run, pending});
  // A drained run keeps none, not even a pending file a killed attempt's sink left.
  janitor.sweep_drained();
  CHECK(listing(janitor.dir()).empty());
  // Nothing to do without a spool directory.
  fs::remove_all(janitor.dir());
  CHECK(janitor.unneeded(Stage::Ended).empty());
  janitor.sweep_drained();
}

TEST_CASE("spool file lists travel in an ACK and in _metadata", "[spool]") {
  using streamctl::runtime::decode_spool_files;
  using streamctl::runtime::encode_spool_files;
  std::vector<std::string> names{"stdin-in.a.spool", "stdin-in.a.0011223344556677.spool"};
  CHECK(decode_spool_files(encode_spool_files(names)) == names);
  CHECK(decode_spool_files("").empty());
  CHECK(decode_spool_files("../x\nok.spool") == std::vector<std::string>{"ok.spool"});

  streamctl::testing::TempDir tmp;
  snapshot_listing(tmp.path, names, 4);
  auto read = streamctl::runtime::read_metadata(tmp.path);
  REQUIRE(read.ok());
  REQUIRE(read->tasks.size() == 2);
  CHECK(read->tasks[0].spool_files == names);
  CHECK(read->tasks[1].spool_files.empty());
  // A bad name is refused: the janitor must never be led out of the spool directory.
  std::ifstream in(tmp.path / "_metadata");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto at = text.find("stdin-in.a.spool");
  REQUIRE(at != std::string::npos);
  text.replace(at, 16, "../../etc/passwd");
  // Signed again, so that the name check is what refuses it, not the checksum.
  auto checksum_line = text.rfind("\nchecksum");
  REQUIRE(checksum_line != std::string::npos);
  text.resize(checksum_line + 1);
  std::ofstream(tmp.path / "_metadata", std::ios::trunc) << streamctl::runtime::append_checksum_line(text);
  auto bad = streamctl::runtime::read_metadata(tmp.path);
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.error(), Catch::Contains("spool"));
}
