// The worker's half of a restore from storage = "coordinator"
// (pipeline/runtime/remote_checkpoint_files): the snapshot arrives whole in a private
// staging directory under $TMPDIR, which goes when the restore is done and when the fetch
// fails. The coordinator's side is the real one: a ControlChannel answered by a
// SnapshotServer.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <sys/stat.h>
#include <thread>

#include "pipeline/runtime/checkpoint_metadata.hpp"
#include "pipeline/runtime/checkpoint_restore.hpp"
#include "pipeline/runtime/control_channel.hpp"
#include "pipeline/runtime/remote_checkpoint_files.hpp"
#include "pipeline/runtime/snapshot_server.hpp"
#include "state/key_group.hpp"
#include "state/snapshot_format.hpp"
#include "unit/temp_dir.hpp"

using namespace streamctl;
using namespace std::chrono_literals;
using streamctl::testing::TempDir;
namespace fs = std::filesystem;

namespace {

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

// $TMPDIR for the length of a test.
class TmpdirAs {
public:
  explicit TmpdirAs(const fs::path& dir) {
    if (const char* old = std::getenv("TMPDIR")) old_ = old;
    ::setenv("TMPDIR", dir.c_str(), 1);
  }
  ~TmpdirAs() {
    if (old_)
      ::setenv("TMPDIR", old_->c_str(), 1);
    else
      ::unsetenv("TMPDIR");
  }

private:
  std::optional<std::string> old_;
};

bool empty_dir(const fs::path& dir) {
  return fs::is_empty(dir);
}

// Chain "src -> counts" at parallelism 3; the files' bytes are not a snapshot's (the fetch
// never looks inside them), and `missing` is listed but not there.
fs::path write_savepoint(const fs::path& root, std::uint64_t size,
                         const std::string& missing = "") {
  fs::path dir = root / "savepoint-1";
  fs::create_directories(dir);
  runtime::CheckpointMetadata m;
  m.kind = "savepoint";
  m.job_name = "p";
  m.job_id = "p-1";
  m.checkpoint_id = 1;
  for (int i = 0; i < 3; ++i) {
    std::string file = runtime::task_snapshot_file(0, i);
    std::string bytes(size + static_cast<std::uint64_t>(i), '\0');
    for (std::size_t k = 0; k < bytes.size(); ++k)
      bytes[k] = static_cast<char>(k * 13 + static_cast<std::size_t>(i));
    if (file != missing) write_file(dir / file, bytes);
    m.tasks.push_back(runtime::CheckpointTaskFile{file, {"src", "counts"}, i, 3, bytes.size()});
  }
  REQUIRE(runtime::write_metadata(dir, m));
  return dir;
}

// Serves `dir` to attempt 1 on an ipc control channel while `fetch` runs on another thread.
Result<runtime::StagingDir> fetch_served(const fs::path& socket_dir, const fs::path& dir,
                                         const runtime::FetchSettings& settings = {}) {
  runtime::ControlChannel control;
  std::string endpoint = control.bind("ipc", socket_dir);
  runtime::SnapshotServer server;
  server.begin_attempt(1, dir);
  zmq::context_t context;
  std::optional<Result<runtime::StagingDir>> result;
  std::atomic<bool> done = false;
  std::thread worker([&] {
    result.emplace(runtime::fetch_snapshot(context, endpoint, transport::LinkSecurity::plain(), 2,
                                           1, settings));
    done = true;
  });
  while (!done) {
    zmq::pollitem_t items[] = {{control.handle(), 0, ZMQ_POLLIN, 0}};
    zmq::poll(items, 1, 20ms);
    while (auto in = control.receive())
      if (in->message && runtime::SnapshotServer::is_fetch(*in->message))
        control.send(in->identity, server.answer(in->identity, *in->message));
  }
  worker.join();
  return std::move(*result);
}

} // namespace

TEST_CASE("a worker fetches the whole snapshot into a private staging dir, removed after",
          "[remote_checkpoint_files]") {
  TempDir coordinator, tmpdir;
  TmpdirAs as(tmpdir.path);
  fs::path dir = write_savepoint(coordinator.path, 3 * 1024 * 1024 + 5);
  fs::path staged_path;
  {
    auto staged = fetch_served(coordinator.path, dir);
    REQUIRE(staged);
    staged_path = staged->path();
    CHECK(staged_path.parent_path() == tmpdir.path);
    struct stat st {};
    REQUIRE(::stat(staged_path.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0700);
    for (const auto& name :
         {std::string(runtime::kMetadataFile), runtime::task_snapshot_file(0, 0),
          runtime::task_snapshot_file(0, 1), runtime::task_snapshot_file(0, 2)}) {
      CAPTURE(name);
      CHECK(read_file(staged_path / name) == read_file(dir / name));
    }
    auto metadata = runtime::read_metadata(staged_path);
    CHECK(metadata);
  }
  CHECK_FALSE(fs::exists(staged_path));
  CHECK(empty_dir(tmpdir.path));
}

TEST_CASE("a fetch that fails names the file and leaves no staging dir",
          "[remote_checkpoint_files]") {
  TempDir coordinator, tmpdir;
  TmpdirAs as(tmpdir.path);

  SECTION("a file _metadata lists is not on the coordinator") {
    fs::path dir = write_savepoint(coordinator.path, 1000, runtime::task_snapshot_file(0, 1));
    auto staged = fetch_served(coordinator.path, dir);
    REQUIRE_FALSE(staged);
    CAPTURE(staged.error());
    CHECK(staged.error().rfind(runtime::task_snapshot_file(0, 1) + ": the coordinator refused it",
                               0) == 0);
  }
  SECTION("the coordinator does not answer") {
    zmq::context_t context;
    runtime::FetchSettings settings;
    settings.per_file = 300ms;
    settings.resend_after = 100ms;
    auto started = std::chrono::steady_clock::now();
    auto staged =
        runtime::fetch_snapshot(context, "ipc://" + (coordinator.path / "nobody.sock").string(),
                                transport::LinkSecurity::plain(), 0, 1, settings);
    REQUIRE_FALSE(staged);
    CAPTURE(staged.error());
    CHECK(staged.error().rfind(std::string(runtime::kMetadataFile) + ": not received within", 0) ==
          0);
    CHECK(std::chrono::steady_clock::now() - started < 5s);
  }
  CHECK(empty_dir(tmpdir.path));
}

// A damaged snapshot on the coordinator arrives damaged: CheckpointRestore's checksums refuse
// the copy, and the message names the coordinator's file, not the copy's.
TEST_CASE("a damaged snapshot fetched from the coordinator is refused naming its file there",
          "[remote_checkpoint_files]") {
  TempDir coordinator, tmpdir;
  TmpdirAs as(tmpdir.path);
  fs::path dir = coordinator.path / "savepoint-2";
  fs::create_directories(dir);
  runtime::CheckpointMetadata m;
  m.kind = "savepoint";
  m.job_name = "p";
  m.job_id = "p-1";
  m.checkpoint_id = 2;
  m.max_parallelism = 8;
  state::SnapshotHeader h;
  h.job_name = "p";
  h.checkpoint_id = 2;
  h.max_parallelism = 8;
  h.parallelism = 1;
  h.key_groups = state::key_group_range(0, 1, 8);
  h.chain_nodes = {"counts"};
  std::string file = runtime::task_snapshot_file(0, 0);
  auto writer = state::SnapshotWriter::create(dir / file, std::move(h));
  REQUIRE(writer);
  REQUIRE(writer->add_segment("counts", state::SegmentKind::Keyed, 3, std::string(5000, 'k')));
  auto summary = writer->finish();
  REQUIRE(summary);
  m.tasks.push_back(runtime::CheckpointTaskFile{file, {"counts"}, 0, 1, summary->file_bytes});
  REQUIRE(runtime::write_metadata(dir, m));
  {
    auto reader = state::SnapshotReader::open(dir / file);
    REQUIRE(reader);
    const state::SegmentInfo* segment = reader->find("counts", state::SegmentKind::Keyed, 3);
    REQUIRE(segment);
    std::string bytes = read_file(dir / file);
    bytes[segment->offset + segment->compressed_length / 2] ^= 0x5A;
    write_file(dir / file, bytes);
  }

  auto staged = fetch_served(coordinator.path, dir);
  REQUIRE(staged);
  auto restore = runtime::CheckpointRestore::open(staged->path());
  REQUIRE(restore);
  auto keyed = restore->keyed("counts", 3);
  REQUIRE_FALSE(keyed);
  std::string message = runtime::name_on_coordinator(keyed.error(), *staged, dir);
  CAPTURE(message);
  CHECK(message.rfind((dir / file).string() + ": checksum mismatch", 0) == 0);
  CHECK(message.find("fetched from the coordinator") != std::string::npos);
  CHECK(message.find(staged->path().string()) == std::string::npos);
}
