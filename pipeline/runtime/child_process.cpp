#include "pipeline/runtime/child_process.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "state/error.hpp"

namespace streamctl::runtime {

ChildProcess::ChildProcess(const ChildSpec& spec) {
  // Everything the child needs is prepared before fork: between fork and exec only
  // async-signal-safe calls are allowed (the parent has ZeroMQ threads).
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(spec.executable.c_str()));
  for (const auto& a : spec.args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t parent = ::getpid();

  // Both ends close on exec, so that no other child inherits the channel (and holds its EOF
  // back); the child moves its read end onto bootstrap_fd, which clears the flag there.
  int channel[2] = {-1, -1};
  if (spec.bootstrap && ::pipe2(channel, O_CLOEXEC) != 0)
    throw Error(ErrorKind::Internal, std::string("cannot start a worker: pipe: ") + std::strerror(errno));

  pid_t pid = ::fork();
  if (pid < 0) {
    int fork_errno = errno;
    if (spec.bootstrap) {
      ::close(channel[0]);
      ::close(channel[1]);
    }
    throw Error(ErrorKind::Internal, std::string("cannot start a worker: fork: ") + std::strerror(fork_errno));
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1); // the parent died before prctl took effect
    // Ctrl-C reaches the whole foreground process group; the coordinator alone decides how
    // the job stops, so workers ignore SIGINT.
    ::signal(SIGINT, SIG_IGN);
    // A process group of its own, so that a signal to the coordinator's group (`timeout`,
    // systemd) reaches the coordinator alone and it can stop the job in order; except for a
    // worker reading a terminal, which must stay in the foreground group to read it.
    if (!(spec.inherit_stdin && ::isatty(STDIN_FILENO))) ::setpgid(0, 0);
    ::signal(SIGPIPE, SIG_IGN);
    ::signal(SIGTERM, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (!spec.inherit_stdin) {
      int null_fd = ::open("/dev/null", O_RDONLY);
      if (null_fd >= 0) {
        ::dup2(null_fd, STDIN_FILENO);
        ::close(null_fd);
      }
    }
    if (spec.bootstrap) {
      if (channel[0] == spec.bootstrap_fd) ::fcntl(channel[0], F_SETFD, 0);
      else if (::dup2(channel[0], spec.bootstrap_fd) < 0) ::_exit(127);
    }
    ::execv(spec.executable.c_str(), argv.data());
    ::_exit(127);
  }
  pid_ = pid;
  running_ = true;
  if (spec.bootstrap) {
    ::close(channel[0]);
    bootstrap_writer_ = channel[1];
    write_bootstrap(*spec.bootstrap);
  }
}

// Blocks until the child (or its ssh, which reads eagerly) has taken the bytes; a pipe holds
// 64 KiB. A child that died meanwhile gives EPIPE (SIGPIPE is ignored): its exit status is
// what the coordinator reports, so the write just stops.
void ChildProcess::write_bootstrap(const std::string& bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(bootstrap_writer_, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

void ChildProcess::close_bootstrap() {
  if (bootstrap_writer_ < 0) return;
  ::close(bootstrap_writer_);
  bootstrap_writer_ = -1;
}

ChildProcess::~ChildProcess() {
  if (running_) kill_and_reap();
  close_bootstrap();
}

void ChildProcess::signal(int sig) const {
  if (running_) ::kill(pid_, sig);
}

void ChildProcess::kill_and_reap() {
  if (!running_) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  reaped(status);
  // A remote worker outlives its killed ssh client: EOF on its stdin is what ends it.
  close_bootstrap();
}

std::string ChildProcess::describe_exit() const {
  if (WIFEXITED(status_)) return "exited with status " + std::to_string(WEXITSTATUS(status_));
  if (WIFSIGNALED(status_)) {
    int sig = WTERMSIG(status_);
    return "killed by signal " + std::to_string(sig) + " (" + ::strsignal(sig) + ")";
  }
  return "stopped";
}

} // namespace streamctl::runtime
