// The coordinator's half of a restore from storage = "coordinator"
// (pipeline/runtime/snapshot_server): it serves the running attempt's snapshot in parts, and
// nothing else: no file that _metadata does not list, no path, no other attempt's worker.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "pipeline/runtime/checkpoint_metadata.hpp"
#include "pipeline/runtime/snapshot_server.hpp"
#include "unit/temp_dir.hpp"

using namespace streamctl;
using runtime::SnapshotServer;
using streamctl::testing::TempDir;
namespace fs = std::filesystem;

namespace {

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

// A savepoint of one chain "src -> counts" at parallelism 2 whose task files hold `bytes`
// (the server never looks inside them), beside a file it does not list.
fs::path write_savepoint(const fs::path& root, const std::string& bytes) {
  fs::path dir = root / "savepoint-1";
  fs::create_directories(dir);
  runtime::CheckpointMetadata m;
  m.kind = "savepoint";
  m.job_name = "p";
  m.job_id = "p-1";
  m.checkpoint_id = 1;
  for (int i = 0; i < 2; ++i) {
    std::string file = runtime::task_snapshot_file(0, i);
    write_file(dir / file, bytes);
    m.tasks.push_back(runtime::CheckpointTaskFile{file, {"src", "counts"}, i, 2, bytes.size()});
  }
  REQUIRE(runtime::write_metadata(dir, m));
  write_file(dir / "notes.txt", "not part of the snapshot");
  write_file(root / "secret", "outside the snapshot");
  return dir;
}

transport::ControlMessage fetch(int task, int attempt, const std::string& name,
                                std::uint64_t offset,
                                std::uint64_t length = runtime::kMaxFetchPart) {
  return transport::ControlMessage{"FETCH", {}}
      .set("task", std::to_string(task))
      .set("attempt", std::to_string(attempt))
      .set("name", name)
      .set("offset", std::to_string(offset))
      .set("length", std::to_string(length));
}

transport::ControlMessage ask(SnapshotServer& server, int task, int attempt,
                              const std::string& name, std::uint64_t offset = 0,
                              std::uint64_t length = runtime::kMaxFetchPart) {
  return server.answer(SnapshotServer::fetch_identity(task, attempt),
                       fetch(task, attempt, name, offset, length));
}

} // namespace

TEST_CASE("the snapshot server serves _metadata and the files it lists, in parts",
          "[snapshot_server]") {
  TempDir tmp;
  std::string bytes(3 * runtime::kMaxFetchPart + 17, '\0');
  for (std::size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<char>(i * 7 + 3);
  fs::path dir = write_savepoint(tmp.path, bytes);
  SnapshotServer server;
  server.begin_attempt(2, dir);

  auto metadata = ask(server, 1, 2, runtime::kMetadataFile);
  REQUIRE(metadata.type == "FETCHED");
  CHECK(metadata.get_int("total") ==
        static_cast<std::int64_t>(fs::file_size(dir / runtime::kMetadataFile)));

  // Parts of at most kMaxFetchPart, whatever is asked; none past the end.
  std::string got;
  for (std::uint64_t offset = 0; offset < bytes.size();) {
    auto part = ask(server, 0, 2, "chain-0-subtask-1.snap", offset, 10 * runtime::kMaxFetchPart);
    REQUIRE(part.type == "FETCHED");
    CHECK(part.get_int("total") == static_cast<std::int64_t>(bytes.size()));
    CHECK(part.get("data").size() <= runtime::kMaxFetchPart);
    REQUIRE_FALSE(part.get("data").empty());
    got += part.get("data");
    offset += part.get("data").size();
  }
  CHECK(got == bytes);
  auto end = ask(server, 0, 2, "chain-0-subtask-1.snap", bytes.size() + 5);
  REQUIRE(end.type == "FETCHED");
  CHECK(end.get("data").empty());

  // A path to the _metadata file itself serves the same directory.
  server.begin_attempt(3, dir / runtime::kMetadataFile);
  CHECK(ask(server, 0, 3, "chain-0-subtask-0.snap", 0, 10).get("data") == bytes.substr(0, 10));
}

TEST_CASE("the snapshot server refuses names _metadata does not list, paths and other attempts",
          "[snapshot_server]") {
  TempDir tmp;
  fs::path dir = write_savepoint(tmp.path, "0123456789");
  SnapshotServer server;
  server.begin_attempt(4, dir);
  auto refused = [&](const transport::ControlMessage& answer, const std::string& why) {
    CAPTURE(answer.get("message"));
    CHECK(answer.type == "ERROR");
    CHECK(answer.get("data").empty());
    CHECK(answer.get("message").find(why) != std::string::npos);
  };

  refused(ask(server, 0, 4, "notes.txt"), "not listed in");
  refused(ask(server, 0, 4, "../secret"), "not a file name");
  refused(ask(server, 0, 4, ".."), "not a file name");
  refused(ask(server, 0, 4, "sub/chain-0-subtask-0.snap"), "not a file name");
  refused(ask(server, 0, 4, dir.string() + "/chain-0-subtask-0.snap"), "not a file name");
  refused(ask(server, 0, 4, ""), "not a file name");
  auto nothing = ask(server, 0, 4, "chain-0-subtask-0.snap", 0, 0); // not an error: no bytes
  CHECK(nothing.type == "FETCHED");
  CHECK(nothing.get("data").empty());
  // A worker of an earlier attempt (its restore link is still connected after a restart).
  refused(ask(server, 0, 3, "chain-0-subtask-0.snap"), "not the running attempt");
  // A restore link that claims another task.
  refused(
      server.answer(SnapshotServer::fetch_identity(1, 4), fetch(0, 4, "chain-0-subtask-0.snap", 0)),
      "not the restore link of task 0");
  refused(server.answer("task-0", fetch(0, 4, "chain-0-subtask-0.snap", 0)),
          "not the restore link");
  CHECK(ask(server, 0, 4, "chain-0-subtask-0.snap").get("data") == "0123456789");

  // An attempt that restores from nothing serves nothing.
  server.begin_attempt(5, {});
  refused(ask(server, 0, 5, runtime::kMetadataFile), "restores from no snapshot");
}
