#include "pipeline/runtime/child_process.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <sched.h>
#include <pthread.h>
#include <vector>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "state/error.hpp"

namespace streamctl::runtime {

namespace {

// What the child needs between clone and exec, made before the clone.
struct ChildSetup {
  const ChildSpec* spec = nullptr;
  char** argv = nullptr;
  pid_t parent = 0;
  int channel_read = -1; // the bootstrap channel's read end; -1: none
  const sigset_t* unblocked = nullptr;
};

// Runs in the child, which shares the parent's memory and stack pages until it execs (CLONE_VM
// | CLONE_VFORK, as glibc's posix_spawn does): so only system calls here, nothing that
// allocates or writes what the parent reads. Every signal is blocked on entry (the parent
// blocked them before the clone), and no handler of the parent's may run here, on its memory:
// each caught signal goes back to its default before the mask opens.
int child_main(void* argument) {
  const auto& setup = *static_cast<const ChildSetup*>(argument);
  const ChildSpec& spec = *setup.spec;
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != setup.parent) ::_exit(1); // the parent died before prctl took effect
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction current {};
    if (::sigaction(sig, nullptr, &current) != 0) continue;
    if (current.sa_handler == SIG_IGN || current.sa_handler == SIG_DFL) continue;
    struct sigaction fallback {};
    fallback.sa_handler = SIG_DFL;
    ::sigaction(sig, &fallback, nullptr);
  }
  // Ctrl-C reaches the whole foreground process group; the coordinator alone decides how
  // the job stops, so workers ignore SIGINT.
  ::signal(SIGINT, SIG_IGN);
  // A process group of its own, so that a signal to the coordinator's group (`timeout`,
  // systemd) reaches the coordinator alone and it can stop the job in order; except for a
  // worker reading a terminal, which must stay in the foreground group to read it.
  if (!(spec.inherit_stdin && ::isatty(STDIN_FILENO))) ::setpgid(0, 0);
  ::signal(SIGPIPE, SIG_IGN);
  ::signal(SIGTERM, SIG_DFL);
  if (!spec.inherit_stdin) {
    int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) {
      ::dup2(null_fd, STDIN_FILENO);
      ::close(null_fd);
    }
  }
  if (setup.channel_read >= 0) {
    if (setup.channel_read == spec.bootstrap_fd) ::fcntl(setup.channel_read, F_SETFD, 0);
    else if (::dup2(setup.channel_read, spec.bootstrap_fd) < 0) ::_exit(127);
  }
  ::sigprocmask(SIG_SETMASK, setup.unblocked, nullptr);
  ::execv(spec.executable.c_str(), setup.argv);
  ::_exit(127);
}

} // namespace

// The child is cloned with the parent's memory (CLONE_VM | CLONE_VFORK) rather than forked:
// fork copies the page tables of a coordinator that may hold much memory, and every page
// either process writes afterwards faults to be copied; a job at parallelism 2 starts four
// workers, and this host's page faults are slow. The parent waits in clone until the child
// has exec'd (or exited).
ChildProcess::ChildProcess(const ChildSpec& spec) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(spec.executable.c_str()));
  for (const auto& a : spec.args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  // Both ends close on exec, so that no other child inherits the channel (and holds its EOF
  // back); the child moves its read end onto bootstrap_fd, which clears the flag there.
  int channel[2] = {-1, -1};
  if (spec.bootstrap && ::pipe2(channel, O_CLOEXEC) != 0)
    throw Error(ErrorKind::Internal, std::string("cannot start a worker: pipe: ") + std::strerror(errno));

  sigset_t unblocked;
  sigemptyset(&unblocked);
  ChildSetup setup{&spec, argv.data(), ::getpid(), channel[0], &unblocked};
  // The child's own stack: it must not run on frames of the parent's that it could clobber.
  constexpr std::size_t kStackBytes = 64 * 1024;
  std::vector<char> stack(kStackBytes);

  sigset_t all, before;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &before);
  pid_t pid = ::clone(child_main, stack.data() + stack.size(), CLONE_VM | CLONE_VFORK | SIGCHLD, &setup);
  int clone_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
  if (pid < 0) {
    if (spec.bootstrap) {
      ::close(channel[0]);
      ::close(channel[1]);
    }
    throw Error(ErrorKind::Internal, std::string("cannot start a worker: clone: ") + std::strerror(clone_errno));
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
