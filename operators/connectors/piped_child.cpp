#include "operators/connectors/piped_child.hpp"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "state/error.hpp"

namespace streamctl::connectors {

namespace {

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// PATH lookup happens here, before fork: execvp is not async-signal-safe, and a name that is
// not found is better told as such than as an exit status 127.
std::optional<std::string> find_executable(const std::string& name,
                                           const std::vector<std::string>& env) {
  if (name.find('/') != std::string::npos) return name;
  std::string path = "/usr/local/bin:/usr/bin:/bin";
  for (const auto& e : env)
    if (e.rfind("PATH=", 0) == 0) path = e.substr(5);
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t stop = path.find(':', start);
    if (stop == std::string::npos) stop = path.size();
    std::string dir = path.substr(start, stop - start);
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    if (is_executable_file(candidate)) return candidate;
    start = stop + 1;
  }
  return std::nullopt;
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

std::string startup_error(const PipedChildSpec& spec, const std::string& reason) {
  return "cannot start command " + command_text(spec.argv) + ": " + reason;
}

} // namespace

std::string command_text(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    bool plain = !a.empty() && a.find_first_of(" \t\n'\"\\$`*?;&|<>()[]{}") == std::string::npos;
    if (plain) {
      out += a;
      continue;
    }
    out += '\'';
    for (char c : a)
      out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += '\'';
  }
  return out;
}

PipedChild::PipedChild(const PipedChildSpec& spec) {
  if (spec.argv.empty()) throw Error(ErrorKind::JobFailed, "cannot start an empty command");
  auto executable = find_executable(spec.argv[0], spec.env);
  if (!executable)
    throw Error(ErrorKind::JobFailed,
                startup_error(spec, "'" + spec.argv[0] + "' not found in PATH"));

  // Everything the child needs is built before fork: between fork and exec only
  // async-signal-safe calls are allowed (the worker has ZeroMQ threads).
  std::vector<char*> argv;
  for (const auto& a : spec.argv)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : spec.env)
    envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  std::string dir = spec.working_dir.string();

  // in/out/err: the child's standard streams; report: the child writes its errno there when
  // chdir or execve fails (close-on-exec, so EOF means the exec succeeded).
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1}, report[2] = {-1, -1};
  auto close_all = [&] {
    for (int* p : {in, out, err, report}) {
      close_fd(p[0]);
      close_fd(p[1]);
    }
  };
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0 ||
      ::pipe2(report, O_CLOEXEC) != 0) {
    int e = errno;
    close_all();
    throw Error(ErrorKind::JobFailed,
                startup_error(spec, std::string("pipe: ") + std::strerror(e)));
  }
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    int e = errno;
    close_all();
    throw Error(ErrorKind::JobFailed,
                startup_error(spec, std::string("fork: ") + std::strerror(e)));
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1); // the worker died before prctl took effect
    ::setpgid(0, 0);
    // The worker ignores SIGPIPE and SIGINT and may block signals; a command gets the defaults.
    ::signal(SIGPIPE, SIG_DFL);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    // dup2 clears close-on-exec on the copies; the originals close at exec.
    // The report is {step, errno}: which step failed (0 dup2, 1 chdir, 2 execve), and why.
    auto report_failure = [&](int step) {
      int what[2] = {step, errno};
      [[maybe_unused]] auto n = ::write(report[1], what, sizeof what);
      ::_exit(127);
    };
    if (::dup2(in[0], STDIN_FILENO) < 0 || ::dup2(out[1], STDOUT_FILENO) < 0 ||
        ::dup2(err[1], STDERR_FILENO) < 0)
      report_failure(0);
    if (!dir.empty() && ::chdir(dir.c_str()) != 0) report_failure(1);
    ::execve(executable->c_str(), argv.data(), envp.data());
    report_failure(2);
  }
  pid_ = pid;
  close_fd(in[0]);
  close_fd(out[1]);
  close_fd(err[1]);
  close_fd(report[1]);
  int failure[2] = {0, 0}; // {step, errno}, as the child writes it
  ssize_t n;
  while ((n = ::read(report[0], failure, sizeof failure)) < 0 && errno == EINTR) {
  }
  close_fd(report[0]);
  stdin_ = in[1];
  stdout_ = out[0];
  stderr_ = err[0];
  if (n == static_cast<ssize_t>(sizeof failure)) {
    exit_status(std::chrono::seconds(5)); // reap it; the destructor closes the rest
    std::string reason = std::strerror(failure[1]);
    if (failure[0] == 0) reason = "dup2: " + reason;
    if (failure[0] == 1) reason = "cannot enter directory " + dir + ": " + reason;
    throw Error(ErrorKind::JobFailed, startup_error(spec, reason));
  }
  for (int fd : {stdin_, stdout_, stderr_})
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  // Larger pipes: fewer wake-ups per batch for both sides. Best effort (the size is capped by
  // /proc/sys/fs/pipe-max-size for unprivileged users).
  ::fcntl(stdin_, F_SETPIPE_SZ, 1 << 20);
  ::fcntl(stdout_, F_SETPIPE_SZ, 1 << 20);
}

PipedChild::~PipedChild() {
  close_stdin();
  close_fd(stdout_);
  close_fd(stderr_);
  if (pid_ <= 0 || reaped_) return;
  // A command that ended its work exits on EOF at once; one that does not is asked, then told.
  if (exit_status(std::chrono::milliseconds(50))) return;
  ::kill(-pid_, SIGTERM);
  if (exit_status(std::chrono::milliseconds(500))) return;
  ::kill(-pid_, SIGKILL);
  exit_status(std::chrono::seconds(5));
}

void PipedChild::close_stdin() {
  close_fd(stdin_);
}

std::optional<int> PipedChild::exit_status(std::chrono::milliseconds wait_for) {
  if (reaped_) return status_;
  auto deadline = std::chrono::steady_clock::now() + wait_for;
  for (;;) {
    // Seen exited but not reaped (WNOWAIT): the zombie keeps its pid, so the group id cannot
    // have been reused when what is left of the group (grandchildren of a `sh -c`) is killed.
    siginfo_t info{};
    int r = ::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT);
    if (r == 0 && info.si_pid == pid_) {
      ::kill(-pid_, SIGKILL);
      int status = 0;
      while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
      reaped_ = true;
      status_ = status;
      return status_;
    }
    if (r < 0 && errno == ECHILD) {
      // Reaped by someone else (a waitpid(-1) elsewhere in the process): it is gone.
      reaped_ = true;
      status_ = 0;
      return status_;
    }
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::string PipedChild::describe(int wait_status) {
  if (WIFEXITED(wait_status))
    return "exited with status " + std::to_string(WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    int sig = WTERMSIG(wait_status);
    const char* name = ::strsignal(sig);
    return "was killed by signal " + std::to_string(sig) +
           (name ? std::string(" (") + name + ")" : "");
  }
  return "ended with wait status " + std::to_string(wait_status);
}

} // namespace streamctl::connectors
