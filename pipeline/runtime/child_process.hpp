#pragma once
// A worker process started by clone/exec and owned by the coordinator.
//
// The child dies with its parent (PR_SET_PDEATHSIG), so a coordinator killed with -9 leaves no
// worker behind; the destructor kills and reaps a child that is still running, so no path out
// of the coordinator leaves one either.
//
// A child may get a bootstrap channel: a pipe on one of its file descriptors, into which the
// parent writes the bootstrap bytes and which it then keeps open for the child's life. The
// child reads its bootstrap, then waits for EOF there: EOF means the parent has gone or let it
// go. That is how a worker behind `ssh` (which no signal of ours reaches) learns that the
// coordinator died: the ssh client dies with it, and sshd closes the worker's stdin.

#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

namespace streamctl::runtime {

struct ChildSpec {
  std::string executable;
  std::vector<std::string> args; // argv[1..]
  bool inherit_stdin = false;    // else stdin is /dev/null (or the bootstrap channel)
  // When set: the bootstrap channel, on descriptor `bootstrap_fd` of the child (0 replaces
  // stdin; not with inherit_stdin).
  std::optional<std::string> bootstrap;
  int bootstrap_fd = 0;
};

class ChildProcess {
public:
  // Throws streamctl::Error(Internal) when clone or pipe fails. A child that dies before it
  // has read its whole bootstrap is not an error here: its exit status tells why.
  explicit ChildProcess(const ChildSpec& spec);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  bool running() const { return running_; }
  // Records the exit status reaped by the caller's waitpid().
  void reaped(int status) {
    running_ = false;
    status_ = status;
    close_bootstrap();
  }
  int status() const { return status_; }
  // "exited with status 3", "killed by signal 9 (Killed)".
  std::string describe_exit() const;

  void signal(int sig) const;
  // SIGKILL, then wait for it.
  void kill_and_reap();
  // Closes the bootstrap channel: a worker that reads it takes that as the order to exit.
  void close_bootstrap();

private:
  void write_bootstrap(const std::string& bytes);

  pid_t pid_ = -1;
  bool running_ = false;
  int status_ = 0;
  int bootstrap_writer_ = -1; // our end of the bootstrap channel, open while the child runs
};

} // namespace streamctl::runtime
