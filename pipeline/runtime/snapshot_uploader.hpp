#pragma once
// The worker's end of snapshot uploads ([checkpoint] storage = "coordinator"; the protocol
// is drawn in snapshot_upload_protocol.hpp): the AsyncSnapshotWriter writes a task's snapshot
// file into a private staging directory, and the uploader sends it to the coordinator, which
// writes it into the checkpoint's directory. The worker ACKs the checkpoint only once the
// coordinator said the file is stored.
//
// Threading: upload() runs on the snapshot writer's thread, off the record path, with a
// socket of its own made and closed there; the ZeroMQ context is shared (it is thread-safe).

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <string>

#include <zmq.hpp>

#include "pipeline/runtime/staging_dir.hpp"
#include "state/error.hpp"
#include "transport/curve_keys.hpp"

namespace streamctl::runtime {

class SnapshotUploader {
public:
  // `context` must outlive this object; `endpoint` and `security` as the worker's control
  // socket connects.
  SnapshotUploader(zmq::context_t& context, std::string endpoint, transport::LinkSecurity security,
                   int task, int attempt)
      : context_(context), endpoint_(std::move(endpoint)), security_(std::move(security)),
        task_(task), attempt_(attempt) {}

  // Sends `file` as its checkpoint's snapshot (named by its file name) and returns once the
  // coordinator has stored it durably; fails with the reason when the coordinator refused it,
  // when kUploadTimeout passed, or when `cancel` became true (the worker is going away).
  Result<void> upload(const std::filesystem::path& file, std::uint64_t checkpoint,
                      const std::atomic<bool>& cancel);

private:
  zmq::context_t& context_;
  std::string endpoint_;
  transport::LinkSecurity security_;
  int task_;
  int attempt_;
};

} // namespace streamctl::runtime
