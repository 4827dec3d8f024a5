#pragma once
// A worker process started by fork/exec and owned by the coordinator.
//
// The child dies with its parent (PR_SET_PDEATHSIG), so a coordinator killed with -9 leaves no
// worker behind; the destructor kills and reaps a child that is still running, so no path out
// of the coordinator leaves one either.

#include <string>
#include <sys/types.h>
#include <vector>

namespace streamctl::runtime {

struct ChildSpec {
  std::string executable;
  std::vector<std::string> args; // argv[1..]
  bool inherit_stdin = false;    // else stdin is /dev/null
};

class ChildProcess {
public:
  // Throws streamctl::Error(Internal) when fork fails.
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
  }
  int status() const { return status_; }
  // "exited with status 3", "killed by signal 9 (Killed)".
  std::string describe_exit() const;

  void signal(int sig) const;
  // SIGKILL, then wait for it.
  void kill_and_reap();

private:
  pid_t pid_ = -1;
  bool running_ = false;
  int status_ = 0;
};

} // namespace streamctl::runtime
