#pragma once
// A child process whose stdin, stdout and stderr are non-blocking pipes of ours: the command of
// an `exec` node (SPEC §6). Started by fork/execve; owned, so that no path out of the worker
// leaves it running:
// - it dies with the thread that started it (PR_SET_PDEATHSIG), so a worker killed with -9
//   takes its command along;
// - it leads a process group of its own, and the destructor closes its pipes, sends SIGTERM to
//   that group, waits a moment, sends SIGKILL and reaps it (a `sh -c "a | b"` goes whole).
//
// Threading: one owner thread; nothing here is shared.

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

namespace streamctl::connectors {

struct PipedChildSpec {
  std::vector<std::string> argv;     // argv[0] is looked up in PATH unless it holds a '/'
  std::vector<std::string> env;      // the whole environment, "NAME=value"
  std::filesystem::path working_dir; // empty: the parent's
};

class PipedChild {
public:
  // Throws streamctl::Error(JobFailed) when the command cannot be started (not found, not
  // executable, fork or pipe failed), naming the command and the reason.
  explicit PipedChild(const PipedChildSpec& spec);
  ~PipedChild();
  PipedChild(const PipedChild&) = delete;
  PipedChild& operator=(const PipedChild&) = delete;

  pid_t pid() const { return pid_; }
  // Our ends of the child's standard streams, non-blocking; -1 once closed.
  int stdin_fd() const { return stdin_; }
  int stdout_fd() const { return stdout_; }
  int stderr_fd() const { return stderr_; }
  // Closes the child's stdin: it reads EOF there.
  void close_stdin();

  // The wait status once the child has exited, reaping it; nullopt while it runs. With
  // `wait_for` > 0, waits up to that long for it to exit.
  std::optional<int> exit_status(std::chrono::milliseconds wait_for = std::chrono::milliseconds(0));
  // "exited with status 3", "was killed by signal 9 (Killed)".
  static std::string describe(int wait_status);

private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  int status_ = 0;
  int stdin_ = -1, stdout_ = -1, stderr_ = -1;
};

// The command as a person would type it, for messages: python3 'my udf.py' --flag.
std::string command_text(const std::vector<std::string>& argv);

} // namespace streamctl::connectors
