#pragma once
// How a worker sends a snapshot file to the coordinator when the job keeps
// [checkpoint] storage = "coordinator" (SPEC §9): workers on other hosts cannot write
// CHECKPOINT_DIR, so each finished file travels over ZeroMQ to the coordinator, which alone
// writes it there (snapshot_uploader.hpp sends, snapshot_receiver.hpp receives).
//
// Each upload uses a DEALER socket of its own, identity "upload-task-N-aATTEMPT-cCHECKPOINT",
// connected to the coordinator's control endpoint with the control socket's security (CURVE
// when the link leaves the host). Every message is a control message (transport/control.hpp)
// with the fields task, attempt, checkpoint and file (the snapshot's plain file name,
// task_snapshot_file()); SNAPSHOT_PART carries a second frame:
//
//   worker -> coordinator
//     SNAPSHOT_PART  offset=N            frame 2: the file's bytes [N, N + size of frame 2),
//                                        at most kUploadPartBytes; parts go in file order
//     SNAPSHOT_END   size=N xxh64=HEX    the whole file's size and XXH64 (seed 0), 16 lower-case
//                                        hex digits
//   coordinator -> worker
//     SNAPSHOT_PART_OK  offset=N         part N is written (not yet durable)
//     SNAPSHOT_STORED                    the file is durable under its final name
//     SNAPSHOT_ERROR    message=TEXT     the upload is over and nothing of it is kept
//
// At most kUploadWindow parts wait for their SNAPSHOT_PART_OK at a time. An upload that has not
// been STORED within kUploadTimeout has failed: the worker DECLINEs the checkpoint, which is
// abandoned while the job goes on (SPEC §7). The coordinator accepts parts only for the
// checkpoint it is taking now, from the running attempt's workers; anything else is answered
// SNAPSHOT_ERROR. These messages never travel on the record path.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace streamctl::runtime {

inline constexpr std::size_t kUploadPartBytes = 1 << 20;
inline constexpr int kUploadWindow = 4;
inline constexpr std::chrono::seconds kUploadTimeout{30};

inline std::string upload_identity(int task, int attempt, std::uint64_t checkpoint) {
  return "upload-task-" + std::to_string(task) + "-a" + std::to_string(attempt) + "-c" +
         std::to_string(checkpoint);
}

// SNAPSHOT_PART and SNAPSHOT_END: what the coordinator hands to its SnapshotReceiver.
inline bool is_snapshot_upload(std::string_view type) {
  return type == "SNAPSHOT_PART" || type == "SNAPSHOT_END";
}

} // namespace streamctl::runtime
