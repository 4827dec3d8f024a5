#include "pipeline/runtime/parallel_commands.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace streamctl::runtime {

namespace {

struct Running {
  pid_t pid = -1;
  int out = -1; // our read ends
  int err = -1;
  bool exited = false;
};

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// Reads what is there now; closes `fd` at EOF.
void drain(int& fd, std::string& into) {
  char buffer[4096];
  while (fd >= 0) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n > 0) {
      into.append(buffer, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    close_fd(fd);
  }
}

std::string spawn(const CommandSpec& spec, Running& r) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC | O_NONBLOCK) != 0)
    return std::string("pipe: ") + std::strerror(errno);
  if (::pipe2(err, O_CLOEXEC | O_NONBLOCK) != 0) {
    ::close(out[0]);
    ::close(out[1]);
    return std::string("pipe: ") + std::strerror(errno);
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  std::string input = spec.stdin_file.empty() ? "/dev/null" : spec.stdin_file;
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, input.c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO);
  // A child with a default SIGPIPE and no blocked signals, whatever the coordinator set.
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t none, pipe;
  sigemptyset(&none);
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setsigdefault(&attributes, &pipe);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> argv;
  for (const auto& a : spec.argv)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  int rc = ::posix_spawnp(&r.pid, argv[0], &actions, &attributes, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  ::close(out[1]);
  ::close(err[1]);
  if (rc != 0) {
    ::close(out[0]);
    ::close(err[0]);
    r.pid = -1;
    return spec.argv[0] + ": " + std::strerror(rc);
  }
  r.out = out[0];
  r.err = err[0];
  return {};
}

} // namespace

bool CommandOutcome::exited_with(int code) const {
  return start_error.empty() && !timed_out && WIFEXITED(status) && WEXITSTATUS(status) == code;
}

std::string CommandOutcome::last_error_line() const {
  std::size_t end = err.find_last_not_of("\r\n \t");
  if (end == std::string::npos) return {};
  std::size_t start = err.find_last_of('\n', end);
  return err.substr(start == std::string::npos ? 0 : start + 1,
                    end + 1 - (start == std::string::npos ? 0 : start + 1));
}

std::vector<CommandOutcome> run_in_parallel(const std::vector<CommandSpec>& commands,
                                            std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  std::vector<CommandOutcome> outcomes(commands.size());
  std::vector<Running> running(commands.size());
  for (std::size_t k = 0; k < commands.size(); ++k) {
    outcomes[k].start_error = spawn(commands[k], running[k]);
    if (!outcomes[k].start_error.empty()) running[k].exited = true;
  }
  auto deadline = Clock::now() + timeout;
  bool killed = false;
  for (;;) {
    // A command is done when it has exited; what it wrote before is still in its pipes. Its
    // pipes' EOF is not awaited: a process it left behind (an ssh ControlMaster) may hold them.
    bool all_exited = true;
    for (std::size_t k = 0; k < running.size(); ++k) {
      Running& r = running[k];
      drain(r.out, outcomes[k].out);
      drain(r.err, outcomes[k].err);
      if (r.exited) continue;
      int status = 0;
      if (::waitpid(r.pid, &status, WNOHANG) == r.pid) {
        r.exited = true;
        outcomes[k].status = status;
        drain(r.out, outcomes[k].out);
        drain(r.err, outcomes[k].err);
        close_fd(r.out);
        close_fd(r.err);
      } else {
        all_exited = false;
      }
    }
    if (all_exited) break;
    if (!killed && Clock::now() >= deadline) {
      for (std::size_t k = 0; k < running.size(); ++k) {
        if (running[k].exited) continue;
        ::kill(running[k].pid, SIGKILL);
        outcomes[k].timed_out = true;
      }
      killed = true;
    }
    std::vector<pollfd> fds;
    for (const auto& r : running) {
      if (r.out >= 0) fds.push_back({r.out, POLLIN, 0});
      if (r.err >= 0) fds.push_back({r.err, POLLIN, 0});
    }
    // Exits are noticed by polling waitpid: a short sleep when no pipe is left to wake us.
    ::poll(fds.data(), fds.size(), 20);
  }
  for (auto& r : running) {
    close_fd(r.out);
    close_fd(r.err);
  }
  return outcomes;
}

} // namespace streamctl::runtime
