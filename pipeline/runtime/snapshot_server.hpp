#pragma once
// The coordinator's half of a restore from [checkpoint] storage = "coordinator": workers on
// other hosts cannot see CHECKPOINT_DIR, so they fetch the snapshot the running attempt
// restores from over the control link, in parts (remote_checkpoint_files.hpp is the other
// half).
//
// Messages (transport/control.hpp), from a worker's DEALER with identity
// "restore-task-N-aATTEMPT" to the coordinator's ROUTER:
//
//   FETCH    task=N attempt=A name=FILE offset=BYTES length=BYTES
//   FETCHED  name=FILE offset=BYTES total=FILE_SIZE data=BYTES
//            data holds min(length, kMaxFetchPart, total - offset) bytes of FILE from offset
//            (fewer only at the end of the file; none at or past it)
//   ERROR    name=FILE message=WHY
//
// Only the snapshot of the running attempt is served, and only its `_metadata` and the file
// names that _metadata lists: never a name with '/' or starting with '.', never to an older
// attempt's worker. Reads happen on the coordinator's thread, one part per message, so parts
// stay small enough (kMaxFetchPart) that heartbeats and commands are never kept waiting long.
//
// Not thread-safe: the coordinator's thread only.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <string>

#include "transport/control.hpp"

namespace streamctl::runtime {

inline constexpr std::uint64_t kMaxFetchPart = 1024 * 1024;

class SnapshotServer {
public:
  static bool is_fetch(const transport::ControlMessage& m) { return m.type == "FETCH"; }
  static std::string fetch_identity(int task, int attempt) {
    return "restore-task-" + std::to_string(task) + "-a" + std::to_string(attempt);
  }

  // From now on, serve `dir` (a checkpoint or savepoint directory, or its _metadata) to the
  // workers of `attempt`; an empty `dir` serves nothing.
  void begin_attempt(int attempt, const std::filesystem::path& dir);

  // The answer to one FETCH from `identity`: FETCHED or ERROR.
  transport::ControlMessage answer(const std::string& identity,
                                   const transport::ControlMessage& fetch);

private:
  std::optional<std::string> why_refused(const std::string& identity,
                                         const transport::ControlMessage& fetch);

  int attempt_ = -1;
  std::filesystem::path dir_;
  std::optional<std::set<std::string>> listed_; // from dir_/_metadata, read at the first FETCH
};

} // namespace streamctl::runtime
