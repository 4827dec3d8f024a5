#pragma once
// The version of everything a coordinator and its workers say to each other: the bootstrap
// (pipeline/runtime/worker_bootstrap.hpp), the control messages (control.hpp) and the data
// frames (frame.hpp). Processes of one job may run on several hosts, each with the streamctl
// installed there; a worker refuses a coordinator of another protocol (SPEC §9) rather than
// misread it.
//
// Raise it with any change an older peer would misread: a new message type it must act on, a
// field whose meaning changes, a frame layout. Fields an older peer may ignore need no raise.

namespace streamctl::transport {

// 2: snapshot uploads to the coordinator (SNAPSHOT_PART, SNAPSHOT_END and their replies).
inline constexpr int kProtocolVersion = 2;

} // namespace streamctl::transport
