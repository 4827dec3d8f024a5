#pragma once
// Runs a few short commands at once and collects what each printed and how it ended: the
// ssh launcher probes every host in parallel (one login costs ~0.4 s; ten hosts one after the
// other would add seconds to every job start).
//
// Threading: a blocking call, for the coordinator's thread before any worker runs. Each
// command is reaped by pid, so a caller that reaps with waitpid(-1) must not run meanwhile.

#include <chrono>
#include <string>
#include <vector>

namespace streamctl::runtime {

struct CommandSpec {
  std::vector<std::string> argv; // argv[0] is looked up in PATH
  std::string stdin_file;        // empty: /dev/null
};

struct CommandOutcome {
  int status = 0;          // as waitpid gives it
  bool timed_out = false;  // killed at the deadline
  std::string start_error; // the command could not start at all (posix_spawn failed)
  std::string out;
  std::string err;

  bool exited_with(int code) const;
  // The last non-empty line of `err`, for messages.
  std::string last_error_line() const;
};

// Starts every command, then waits for all of them, killing (SIGKILL) those still running at
// `timeout`. Outcomes are in the order of `commands`.
std::vector<CommandOutcome> run_in_parallel(const std::vector<CommandSpec>& commands,
                                            std::chrono::milliseconds timeout);

} // namespace streamctl::runtime
