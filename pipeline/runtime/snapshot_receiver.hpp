#pragma once
// The coordinator's end of snapshot uploads ([checkpoint] storage = "coordinator"; the
// protocol is drawn in snapshot_upload_protocol.hpp): writes each file a worker sends as
// NAME.part in the directory of the checkpoint being taken, and once the whole file has come
// and its size and XXH64 match, fsyncs it and renames it to NAME. Only then does the worker
// ACK the checkpoint, so a checkpoint never completes with a file missing or torn.
//
// It sees no sockets: the Supervisor hands it each message with what it may accept now and
// sends the reply it returns, so a test drives it with plain calls.
//
// Not thread-safe: the coordinator's thread only.

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <spdlog/logger.h>

#include "transport/control.hpp"

struct XXH64_state_s;

namespace streamctl::runtime {

class SnapshotReceiver {
public:
  // The checkpoint the coordinator takes now: uploads for any other are refused.
  struct Accepting {
    int attempt = 0;
    std::uint64_t checkpoint = 0;
    std::filesystem::path dir; // exists: the coordinator made it when it triggered
  };

  explicit SnapshotReceiver(spdlog::logger& log) : log_(log) {}
  // Closes every upload still in progress and removes its .part file.
  ~SnapshotReceiver();
  SnapshotReceiver(const SnapshotReceiver&) = delete;
  SnapshotReceiver& operator=(const SnapshotReceiver&) = delete;

  // One SNAPSHOT_PART (with `payload`, its second frame) or SNAPSHOT_END from the upload
  // socket `identity`; returns the reply for it (SNAPSHOT_PART_OK, SNAPSHOT_STORED or
  // SNAPSHOT_ERROR). `accepting`: none when no checkpoint is being taken. Uploads of other
  // checkpoints than `accepting` are given up first (their .part files removed).
  transport::ControlMessage handle(const std::string& identity, const transport::ControlMessage& m,
                                   std::string_view payload, const std::optional<Accepting>& accepting);
  // Gives up every upload that is not for `accepting`: a checkpoint given up, an attempt over.
  void drop_stale(const std::optional<Accepting>& accepting);
  std::size_t in_progress() const { return uploads_.size(); }

private:
  struct HashStateFree {
    void operator()(XXH64_state_s* state) const;
  };
  struct Upload {
    int attempt = 0;
    std::uint64_t checkpoint = 0;
    std::string file;
    std::filesystem::path part; // DIR/FILE.part
    int fd = -1;
    std::uint64_t written = 0;
    std::unique_ptr<XXH64_state_s, HashStateFree> hash;
  };
  using Uploads = std::map<std::string, Upload>;

  // An error reply; the upload of `identity`, if any, is given up.
  transport::ControlMessage refuse(const std::string& identity, const std::string& why);
  // The open upload of `identity` for `m`, opened at its first message; none (and `error`
  // said why) when the file cannot be created.
  Upload* upload_for(const std::string& identity, const transport::ControlMessage& m,
                     const Accepting& accepting, std::string& error);
  // The whole file is here and matches `m`'s size and XXH64: made durable under its name.
  std::optional<std::string> store(Upload& upload, const transport::ControlMessage& m);
  static void discard(Upload& upload);

  spdlog::logger& log_;
  Uploads uploads_; // by upload socket identity
};

} // namespace streamctl::runtime
