#pragma once
// What a worker receives on its bootstrap channel (child_process.hpp): the job it runs and the
// secrets it needs, sent by the coordinator over a pipe (locally) or over ssh's stdin (on
// another host), never on a command line, which ps(1) shows to every user.
//
// Format, version 1 (all text, so that `streamctl worker --bootstrap-fd 0 < file` can be
// tried by hand):
//
//   "streamctl-bootstrap" SP VERSION SP PROTOCOL LF    header, ASCII, at most 200 bytes
//   LENGTH LF                                           body size in bytes, ASCII decimal
//   BODY                                                LENGTH bytes
//
//   VERSION   the coordinator's streamctl version ("0.1.0"), no spaces
//   PROTOCOL  transport::kProtocolVersion of the coordinator, decimal
//   BODY      a control message (transport/control.hpp) of type BOOTSTRAP, one key=value per
//             line, '\' and newline escaped:
//               pipeline=TEXT              the pipeline file as written
//               override.N=KEY=VALUE       the Nth --set override, N from 0 in order
//               variable.NAME=VALUE        an environment variable the pipeline's ${NAME}
//                                          took on the coordinator (env_expansion.hpp): the
//                                          worker expands with these, never its own
//                                          environment; a NAME absent was unset
//               security=TEXT              opaque here: the job's keys (transport/curve_keys)
//               heartbeat_timeout_ms=N     exit when the coordinator has not answered ALIVE
//                                          for N ms; absent or 0: no such check
//               checkpoint_storage=coordinator
//                                          snapshot files go to the coordinator over the
//                                          control link and a restore reads them from it
//                                          ([checkpoint] storage); absent: the worker reads
//                                          and writes CHECKPOINT_DIR itself ("shared")
//             Keys a reader does not know are kept in `extra` and otherwise ignored, so a
//             field a worker may do without needs no new protocol number.
//
// The header line is the one thing every version of streamctl will read alike: a worker of
// any version reads it first and refuses a coordinator of another version or protocol with a
// message that names both, before it reads anything else.
//
// After the bootstrap nothing more is written on the channel; the coordinator keeps it open
// while it wants the worker, and EOF tells the worker that the coordinator (or its ssh) has
// gone (BootstrapChannelWatch).

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "state/error.hpp"

namespace streamctl::runtime {

struct WorkerBootstrap {
  std::string pipeline;
  std::vector<std::string> overrides;             // "KEY=VALUE", as given to --set
  std::map<std::string, std::string> variables;   // NAME → VALUE (LoadedJob::variables)
  std::string security;                           // carried as it is
  std::chrono::milliseconds heartbeat_timeout{0}; // 0: off
  // Snapshots travel over the control link to the coordinator, which alone touches
  // CHECKPOINT_DIR ([checkpoint] storage = "coordinator").
  bool checkpoint_storage_coordinator = false;
  std::map<std::string, std::string> extra;       // fields this version does not know
};

// This build's streamctl version ("0.1.0").
std::string_view streamctl_version();

// With this build's version and protocol.
std::string encode_bootstrap(const WorkerBootstrap& bootstrap);
// With another version and protocol: for tests of the refusal.
std::string encode_bootstrap(const WorkerBootstrap& bootstrap, std::string_view version,
                             int protocol);

struct BootstrapHeader {
  std::string version;
  int protocol = 0;
};
// One header line without its LF.
Result<BootstrapHeader> parse_bootstrap_header(std::string_view line);
Result<WorkerBootstrap> decode_bootstrap_body(std::string_view body);

// Reads a whole bootstrap from `fd` (blocking) and nothing past it. Throws Error(Usage) when
// the coordinator's version or protocol is not this one's (the message names both, this
// host, and the way out), and Error(Internal) when the channel ends early or holds something
// else.
WorkerBootstrap read_bootstrap(int fd);

// Watches a bootstrap channel after the bootstrap was read, from a thread of its own: on EOF
// or error it calls `on_close` once, from that thread. The destructor stops the watch without
// calling it.
class BootstrapChannelWatch {
public:
  BootstrapChannelWatch(int fd, std::function<void()> on_close);
  ~BootstrapChannelWatch();
  BootstrapChannelWatch(const BootstrapChannelWatch&) = delete;
  BootstrapChannelWatch& operator=(const BootstrapChannelWatch&) = delete;

private:
  void run(int fd, const std::function<void()>& on_close);

  int wake_fd_ = -1; // an eventfd: the destructor's "stop"
  std::thread thread_;
};

} // namespace streamctl::runtime
