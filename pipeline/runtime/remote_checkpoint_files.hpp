#pragma once
// The worker's half of a restore from [checkpoint] storage = "coordinator": the snapshot
// lives only on the coordinator's disk, so the worker fetches it over the control link
// (snapshot_server.hpp draws the messages) into a private staging directory, and restores from
// that copy with CheckpointRestore, whose checks and checksums judge what arrived.
//
// It fetches _metadata, then every file _metadata lists: CheckpointRestore::open checks the
// whole snapshot (every file's header against _metadata, every chain present), and a task
// after a rescale may need several old subtasks' files anyway.
//
// Not thread-safe: the worker's task thread only.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>

#include <zmq.hpp>

#include "pipeline/runtime/staging_dir.hpp"
#include "state/error.hpp"
#include "transport/curve_keys.hpp"

namespace streamctl::runtime {

struct FetchSettings {
  std::chrono::milliseconds per_file{60'000};    // a file not complete by then fails the fetch
  std::chrono::milliseconds resend_after{5'000}; // nothing arrived: ask again for what is missing
  std::uint64_t part = 256 * 1024;               // bytes asked for in one FETCH
  int window = 4;                                // FETCHes in flight at once
};

// Fetches the snapshot the running attempt restores from, from the coordinator at `endpoint`
// (with the job's `security`), as task `task` of attempt `attempt`. Fails naming the file,
// this host and the coordinator when a file is refused or does not arrive in time; the staging
// directory is then gone already.
Result<StagingDir> fetch_snapshot(zmq::context_t& context, const std::string& endpoint,
                                  const transport::LinkSecurity& security, int task, int attempt,
                                  const FetchSettings& settings = {});

// `message` (about the staged copy, from CheckpointRestore) naming the coordinator's
// `original` snapshot directory instead of the copy, which is gone when a person reads it,
// and saying that a copy was read.
std::string name_on_coordinator(std::string message, const StagingDir& staged,
                                const std::filesystem::path& original);

} // namespace streamctl::runtime
