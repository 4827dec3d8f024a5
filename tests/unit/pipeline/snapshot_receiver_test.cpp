// Snapshot uploads to the coordinator ([checkpoint] storage = "coordinator"): the receiver
// keeps a file only when it came whole, with its size and XXH64, under a plain task snapshot
// name, for the checkpoint being taken now; anything else leaves no file behind. The last
// case sends a file through a real uploader and ROUTER, as a worker and the coordinator do.
#include <catch2/catch.hpp>

#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <spdlog/sinks/null_sink.h>
#include <xxhash.h>
#include <zmq.hpp>

#include "pipeline/runtime/snapshot_receiver.hpp"
#include "pipeline/runtime/snapshot_upload_protocol.hpp"
#include "pipeline/runtime/snapshot_uploader.hpp"
#include "unit/temp_dir.hpp"

using namespace streamctl::runtime;
using streamctl::testing::TempDir;
using streamctl::transport::ControlMessage;
namespace fs = std::filesystem;

namespace {

std::shared_ptr<spdlog::logger> null_log() {
  return std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::null_sink_mt>());
}

std::string hex64(const std::string& bytes) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, XXH64(bytes.data(), bytes.size(), 0));
  return buf;
}

std::string bytes_of(std::size_t n) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + i / 7) & 0xff);
  return s;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

ControlMessage upload_message(const char* type, const std::string& file, std::uint64_t checkpoint = 3,
                              int attempt = 0) {
  return ControlMessage{type, {}}
      .set("task", "1")
      .set("attempt", std::to_string(attempt))
      .set("checkpoint", std::to_string(checkpoint))
      .set("file", file);
}

// Sends `bytes` in parts of `part` bytes, then the end with `digest`; returns the last reply.
ControlMessage send_file(SnapshotReceiver& receiver, const std::string& file, const std::string& bytes,
                         const std::optional<SnapshotReceiver::Accepting>& accepting, std::size_t part,
                         const std::string& digest) {
  for (std::size_t offset = 0; offset < bytes.size(); offset += part) {
    auto reply = receiver.handle("upload-task-1-a0-c3",
                                 upload_message("SNAPSHOT_PART", file).set("offset", std::to_string(offset)),
                                 std::string_view(bytes).substr(offset, part), accepting);
    if (reply.type != "SNAPSHOT_PART_OK") return reply;
    CHECK(reply.get("offset") == std::to_string(offset));
  }
  return receiver.handle("upload-task-1-a0-c3",
                         upload_message("SNAPSHOT_END", file)
                             .set("size", std::to_string(bytes.size()))
                             .set("xxh64", digest),
                         {}, accepting);
}

} // namespace

TEST_CASE("a snapshot that comes whole is stored under its name", "[snapshot_receiver]") {
  TempDir dir;
  auto log = null_log();
  SnapshotReceiver receiver(*log);
  SnapshotReceiver::Accepting accepting{0, 3, dir.path};
  std::string bytes = bytes_of(2500);
  auto reply = send_file(receiver, "chain-1-subtask-0.snap", bytes, accepting, 1000, hex64(bytes));
  CHECK(reply.type == "SNAPSHOT_STORED");
  CHECK(read_file(dir.path / "chain-1-subtask-0.snap") == bytes);
  CHECK_FALSE(fs::exists(dir.path / "chain-1-subtask-0.snap.part"));
  CHECK(receiver.in_progress() == 0);
}

TEST_CASE("a snapshot whose checksum or size differs is refused and leaves nothing", "[snapshot_receiver]") {
  TempDir dir;
  auto log = null_log();
  SnapshotReceiver receiver(*log);
  SnapshotReceiver::Accepting accepting{0, 3, dir.path};
  std::string bytes = bytes_of(2500);
  auto reply = send_file(receiver, "chain-1-subtask-0.snap", bytes, accepting, 1000, hex64(bytes + "x"));
  CHECK(reply.type == "SNAPSHOT_ERROR");
  CHECK_THAT(reply.get("message"), Catch::Contains("XXH64"));

  // A part lost on the way: the offsets no longer follow each other.
  receiver.handle("upload-task-1-a0-c3", upload_message("SNAPSHOT_PART", "chain-1-subtask-0.snap").set("offset", "0"),
                  "abc", accepting);
  reply = receiver.handle("upload-task-1-a0-c3",
                          upload_message("SNAPSHOT_PART", "chain-1-subtask-0.snap").set("offset", "10"), "def",
                          accepting);
  CHECK(reply.type == "SNAPSHOT_ERROR");
  CHECK_THAT(reply.get("message"), Catch::Contains("offset 10"));

  // Fewer bytes than the end says.
  receiver.handle("upload-task-1-a0-c3", upload_message("SNAPSHOT_PART", "chain-1-subtask-0.snap").set("offset", "0"),
                  "abc", accepting);
  reply = receiver.handle(
      "upload-task-1-a0-c3",
      upload_message("SNAPSHOT_END", "chain-1-subtask-0.snap").set("size", "4").set("xxh64", hex64("abc")), {},
      accepting);
  CHECK(reply.type == "SNAPSHOT_ERROR");
  CHECK(fs::is_empty(dir.path));
  CHECK(receiver.in_progress() == 0);
}

TEST_CASE("a name that is not a plain task snapshot file name is refused", "[snapshot_receiver]") {
  TempDir dir;
  fs::create_directories(dir.path / "chk-3");
  auto log = null_log();
  SnapshotReceiver receiver(*log);
  SnapshotReceiver::Accepting accepting{0, 3, dir.path / "chk-3"};
  for (std::string name : {"../chain-1-subtask-0.snap", "sub/chain-1-subtask-0.snap", "/tmp/chain-1-subtask-0.snap",
                           "_metadata", "chain-1-subtask-0.snap.part", "chain--subtask-0.snap", "chain-1-subtask-0",
                           "chain-x-subtask-0.snap", "", "chain-1-subtask-0.snap/"}) {
    auto reply = send_file(receiver, name, "abc", accepting, 1000, hex64("abc"));
    INFO(name);
    CHECK(reply.type == "SNAPSHOT_ERROR");
    CHECK_THAT(reply.get("message"), Catch::Contains("not the name of a task's snapshot file"));
  }
  CHECK(fs::is_empty(dir.path / "chk-3"));
  CHECK(fs::directory_iterator(dir.path)->path() == dir.path / "chk-3");
}

TEST_CASE("uploads for a checkpoint not being taken are refused, and a given-up one's part removed",
          "[snapshot_receiver]") {
  TempDir dir;
  auto log = null_log();
  SnapshotReceiver receiver(*log);
  SnapshotReceiver::Accepting accepting{1, 3, dir.path};
  std::string bytes = bytes_of(100);
  // None being taken; another checkpoint; another attempt (the message says attempt 0).
  for (const auto& now : {std::optional<SnapshotReceiver::Accepting>{},
                          std::optional<SnapshotReceiver::Accepting>{SnapshotReceiver::Accepting{0, 4, dir.path}},
                          std::optional<SnapshotReceiver::Accepting>{accepting}}) {
    auto reply = send_file(receiver, "chain-0-subtask-0.snap", bytes, now, 1000, hex64(bytes));
    CHECK(reply.type == "SNAPSHOT_ERROR");
    CHECK_THAT(reply.get("message"), Catch::Contains("is not being taken"));
  }
  CHECK(fs::is_empty(dir.path));

  // Half-way through, checkpoint 3 is given up and 4 is taken: the part goes, and the rest of
  // the upload is refused.
  SnapshotReceiver::Accepting three{0, 3, dir.path};
  auto reply = receiver.handle("upload-task-1-a0-c3",
                               upload_message("SNAPSHOT_PART", "chain-0-subtask-0.snap").set("offset", "0"), "abc",
                               three);
  CHECK(reply.type == "SNAPSHOT_PART_OK");
  CHECK(fs::exists(dir.path / "chain-0-subtask-0.snap.part"));
  receiver.drop_stale(SnapshotReceiver::Accepting{0, 4, dir.path / "chk-4"});
  CHECK_FALSE(fs::exists(dir.path / "chain-0-subtask-0.snap.part"));
  CHECK(receiver.in_progress() == 0);
  reply = receiver.handle("upload-task-1-a0-c3",
                          upload_message("SNAPSHOT_END", "chain-0-subtask-0.snap").set("size", "3").set("xxh64", hex64("abc")),
                          {}, SnapshotReceiver::Accepting{0, 4, dir.path});
  CHECK(reply.type == "SNAPSHOT_ERROR");
  CHECK(fs::is_empty(dir.path));
}

TEST_CASE("an uploader sends a file of several parts through a ROUTER to the receiver", "[snapshot_receiver]") {
  TempDir dir;
  fs::create_directories(dir.path / "staging");
  fs::create_directories(dir.path / "chk-5");
  std::string bytes = bytes_of(kUploadPartBytes * 5 + 12345);
  fs::path file = dir.path / "staging" / "chain-2-subtask-1.snap";
  std::ofstream(file, std::ios::binary) << bytes;

  zmq::context_t context;
  zmq::socket_t router(context, zmq::socket_type::router);
  router.set(zmq::sockopt::linger, 0);
  router.bind("inproc://control");
  std::atomic<bool> done{false};
  int most_parts_unanswered = 0;
  std::thread coordinator([&] {
    auto log = null_log();
    SnapshotReceiver receiver(*log);
    SnapshotReceiver::Accepting accepting{2, 5, dir.path / "chk-5"};
    int unanswered = 0;
    while (!done) {
      zmq::pollitem_t items[] = {{router.handle(), 0, ZMQ_POLLIN, 0}};
      zmq::poll(items, 1, std::chrono::milliseconds(50));
      // Reads every message waiting before answering, to see how many parts are in flight.
      std::vector<std::pair<std::string, ControlMessage>> replies;
      zmq::message_t identity, body, payload;
      while (router.recv(identity, zmq::recv_flags::dontwait)) {
        (void)router.recv(body);
        auto m = streamctl::transport::decode_control(body.to_string_view());
        payload.rebuild();
        if (body.more()) (void)router.recv(payload);
        if (m->type == "SNAPSHOT_PART") most_parts_unanswered = std::max(most_parts_unanswered, ++unanswered);
        replies.emplace_back(identity.to_string(),
                             receiver.handle(identity.to_string(), *m,
                                             std::string_view(static_cast<const char*>(payload.data()), payload.size()),
                                             accepting));
      }
      for (auto& [to, reply] : replies) {
        if (reply.type == "SNAPSHOT_PART_OK") --unanswered;
        router.send(zmq::buffer(to), zmq::send_flags::sndmore);
        router.send(zmq::buffer(streamctl::transport::encode_control(reply)));
      }
    }
  });
  SnapshotUploader uploader(context, "inproc://control", streamctl::transport::LinkSecurity::plain(), 7, 2);
  std::atomic<bool> cancel{false};
  auto ok = uploader.upload(file, 5, cancel);
  done = true;
  coordinator.join();
  REQUIRE(ok);
  CHECK(read_file(dir.path / "chk-5" / "chain-2-subtask-1.snap") == bytes);
  CHECK(most_parts_unanswered <= kUploadWindow);
  CHECK(most_parts_unanswered >= 1);
}
