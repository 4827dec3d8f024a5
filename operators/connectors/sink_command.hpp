#pragma once
// The child process of an exec sink: a command (argv, found on PATH, no shell) whose stdin is
// a pipe the sink writes lines into, and whose stdout and stderr go, line by line with
// `prefix` in front, to the worker's stderr — never to the job's data stdout.
//
// The command is not killed when its worker dies: it sees EOF on stdin, and can still handle
// what the pipe held (lines a checkpoint covers, which no restore sends again). The destructor
// (a failed or cancelled task) closes stdin too, gives the command kStopGrace to exit, then
// kills it; either way it is reaped.
//
// Threading: constructed, used and destroyed by the sink's task thread; a thread of its own
// copies the command's output to stderr (it touches nothing else).

#include <atomic>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <thread>
#include <vector>

#include "state/error.hpp"

namespace streamctl::connectors {

class SinkCommand {
public:
  // Throws Error(JobFailed), starting with `who`, when the command cannot be started (not
  // found, not executable).
  SinkCommand(const std::vector<std::string>& argv, std::string who, std::string prefix);
  ~SinkCommand();
  SinkCommand(const SinkCommand&) = delete;
  SinkCommand& operator=(const SinkCommand&) = delete;

  // Writes all of `bytes` to the command's stdin, blocking while its pipe is full. A failure
  // (the command closed its stdin or exited: EPIPE) carries strerror.
  Result<void> write(std::string_view bytes);
  // Closes stdin and waits for the command to exit; returns its wait status.
  int close_and_wait();
  // "exited with status 3", "was killed by signal 9 (Killed)".
  static std::string describe(int status);

private:
  void forward_output(int fd);
  void stop_forwarding();
  int wait_for_exit(bool kill_after_grace);

  std::string who_;
  std::string prefix_;
  pid_t pid_ = -1;
  int stdin_ = -1;
  std::thread forwarder_;
  std::atomic<bool> exited_{false}; // the command was reaped: the forwarder drains and stops
};

} // namespace streamctl::connectors
