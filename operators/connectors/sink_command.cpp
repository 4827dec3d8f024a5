#include "operators/connectors/sink_command.hpp"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "operators/fd_writer.hpp"

namespace streamctl::connectors {

namespace {

constexpr std::chrono::milliseconds kStopGrace{2000};

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

} // namespace

SinkCommand::SinkCommand(const std::vector<std::string>& argv, std::string who, std::string prefix)
    : who_(std::move(who)), prefix_(std::move(prefix)) {
  // Everything the child needs is prepared before fork: between fork and exec only
  // async-signal-safe calls (the worker has ZeroMQ threads).
  std::vector<char*> args;
  for (const auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  // All ends close on exec, so that no other child holds them open (and an EOF back). The
  // status pipe tells exec failure (errno) from success (EOF at exec).
  int in[2] = {-1, -1}, out[2] = {-1, -1}, status[2] = {-1, -1};
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 ||
      ::pipe2(status, O_CLOEXEC) != 0) {
    int e = errno;
    for (int* p : {in, out, status}) {
      close_fd(p[0]);
      close_fd(p[1]);
    }
    throw Error(ErrorKind::JobFailed,
                who_ + ": cannot start '" + argv[0] + "': pipe: " + std::strerror(e));
  }
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(in[0], STDIN_FILENO);
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(out[1], STDERR_FILENO);
    // The worker ignores SIGPIPE and SIGINT and may block signals: the command gets the
    // defaults, as from a shell.
    ::signal(SIGPIPE, SIG_DFL);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execvp(args[0], args.data());
    int e = errno;
    [[maybe_unused]] auto n = ::write(status[1], &e, sizeof e);
    ::_exit(127);
  }
  int fork_errno = errno;
  close_fd(in[0]);
  close_fd(out[1]);
  close_fd(status[1]);
  if (pid < 0) {
    close_fd(in[1]);
    close_fd(out[0]);
    close_fd(status[0]);
    throw Error(ErrorKind::JobFailed,
                who_ + ": cannot start '" + argv[0] + "': fork: " + std::strerror(fork_errno));
  }
  pid_ = pid;
  stdin_ = in[1];
  int exec_errno = 0;
  ssize_t n;
  do
    n = ::read(status[0], &exec_errno, sizeof exec_errno);
  while (n < 0 && errno == EINTR);
  close_fd(status[0]);
  if (n == static_cast<ssize_t>(sizeof exec_errno)) {
    close_fd(out[0]);
    wait_for_exit(false);
    throw Error(ErrorKind::JobFailed,
                who_ + ": cannot run '" + argv[0] + "': " + std::strerror(exec_errno));
  }
  forwarder_ = std::thread([this, fd = out[0]] { forward_output(fd); });
}

SinkCommand::~SinkCommand() {
  if (pid_ > 0) wait_for_exit(true);
  stop_forwarding();
}

Result<void> SinkCommand::write(std::string_view bytes) {
  return operators::write_all(stdin_, bytes);
}

int SinkCommand::close_and_wait() {
  int status = wait_for_exit(false);
  stop_forwarding();
  return status;
}

int SinkCommand::wait_for_exit(bool kill_after_grace) {
  close_fd(stdin_); // EOF: the command's signal to finish
  int status = 0;
  if (kill_after_grace) {
    auto deadline = std::chrono::steady_clock::now() + kStopGrace;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() >= deadline) {
        ::kill(pid_, SIGKILL);
        break;
      }
      ::usleep(10'000);
    }
  }
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  exited_ = true;
  return status;
}

void SinkCommand::stop_forwarding() {
  exited_ = true;
  if (forwarder_.joinable()) forwarder_.join();
}

void SinkCommand::forward_output(int fd) {
  std::string pending; // a line not yet ended
  std::string line;
  char chunk[8192];
  auto emit = [&](std::string_view text) {
    line.assign(prefix_);
    line.append(text);
    line += '\n';
    // One write per line: lines of several commands do not interleave within a line.
    (void)operators::write_all(STDERR_FILENO, line);
  };
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    int ready = ::poll(&p, 1, 100);
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      // Reaped and silent: a background child of the command may keep the pipe open for
      // ever; what it writes from now on is not the sink's business.
      if (exited_) break;
      continue;
    }
    ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    pending.append(chunk, static_cast<std::size_t>(n));
    std::size_t from = 0;
    for (std::size_t nl; (nl = pending.find('\n', from)) != std::string::npos; from = nl + 1)
      emit(std::string_view(pending).substr(from, nl - from));
    pending.erase(0, from);
  }
  if (!pending.empty()) emit(pending);
  ::close(fd);
}

std::string SinkCommand::describe(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return "was killed by signal " + std::to_string(sig) + " (" + ::strsignal(sig) + ")";
  }
  return "stopped";
}

} // namespace streamctl::connectors
