#include "pipeline/runtime/forked_snapshot.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "pipeline/runtime/async_snapshot_writer.hpp"

namespace streamctl::runtime {

namespace {

bool write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

// Closes every descriptor from 3 up but `keep`; one by one where close_range is missing
// (kernels before 5.9).
void close_all_but(int keep) {
  const auto k = static_cast<unsigned>(keep);
  bool done = (k <= 3 || ::close_range(3, k - 1, 0) == 0) && ::close_range(k + 1, ~0U, 0) == 0;
  if (done) return;
  rlimit limit{};
  const long open_max = ::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY
                            ? static_cast<long>(limit.rlim_cur)
                            : 65536;
  for (long fd = 3; fd < open_max; ++fd)
    if (fd != keep) ::close(static_cast<int>(fd));
}

// The child's whole life: never returns.
[[noreturn]] void run_child(pid_t parent, int report_fd, SnapshotJob& job,
                            const std::function<std::vector<SnapshotSegment>()>& segments) {
  // Dies with the task thread that forked it; and if that already happened, goes at once.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(3);
  // The worker's handlers and masks are not this process's: default signals, none blocked.
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGUSR1, SIGUSR2}) ::signal(sig, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  // No socket, pipe or file of the worker stays open in this process.
  close_all_but(report_fd);

  SnapshotWritten written;
  try {
    job.segments = segments();
    written = AsyncSnapshotWriter::write(job);
  } catch (const std::exception& e) {
    written.error = std::string("the snapshot process failed: ") + e.what();
  } catch (...) {
    written.error = "the snapshot process failed";
  }
  char figures[96];
  std::snprintf(figures, sizeof figures, "%llu %llu %.6f\n", static_cast<unsigned long long>(written.bytes),
                static_cast<unsigned long long>(written.raw_bytes), written.seconds);
  const bool reported = write_all(report_fd, figures) && write_all(report_fd, written.error);
  ::_exit(reported ? 0 : 4);
}

} // namespace

std::string ForkedSnapshot::unavailable_reason() {
#if defined(__SANITIZE_ADDRESS__)
  return "this is a sanitizer build, whose allocator is not fork-safe";
#else
  return {};
#endif
}

Result<ForkedSnapshot> ForkedSnapshot::start(SnapshotJob job,
                                             const std::function<std::vector<SnapshotSegment>()>& segments,
                                             std::chrono::milliseconds timeout) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return fail(std::string("cannot fork the snapshot: pipe: ") + std::strerror(errno));
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int fork_errno = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return fail(std::string("cannot fork the snapshot: ") + std::strerror(fork_errno));
  }
  if (pid == 0) {
    ::close(fds[0]);
    run_child(parent, fds[1], job, segments);
  }
  ::close(fds[1]);
  return ForkedSnapshot(pid, fds[0], job.checkpoint_id, job.path.filename().string(),
                        std::chrono::steady_clock::now() + timeout);
}

ForkedSnapshot::ForkedSnapshot(pid_t pid, int report_fd, std::uint64_t checkpoint_id, std::string file_name,
                               std::chrono::steady_clock::time_point deadline)
    : deadline_(deadline), pid_(pid), report_fd_(report_fd), checkpoint_id_(checkpoint_id),
      file_name_(std::move(file_name)) {}

ForkedSnapshot::ForkedSnapshot(ForkedSnapshot&& other) noexcept
    : deadline_(other.deadline_), pid_(std::exchange(other.pid_, -1)),
      report_fd_(std::exchange(other.report_fd_, -1)), checkpoint_id_(other.checkpoint_id_),
      file_name_(std::move(other.file_name_)) {}

ForkedSnapshot& ForkedSnapshot::operator=(ForkedSnapshot&& other) noexcept {
  if (this != &other) {
    kill_and_reap();
    deadline_ = other.deadline_;
    pid_ = std::exchange(other.pid_, -1);
    report_fd_ = std::exchange(other.report_fd_, -1);
    checkpoint_id_ = other.checkpoint_id_;
    file_name_ = std::move(other.file_name_);
  }
  return *this;
}

ForkedSnapshot::~ForkedSnapshot() { kill_and_reap(); }

void ForkedSnapshot::kill_and_reap() {
  if (report_fd_ >= 0) ::close(std::exchange(report_fd_, -1));
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {}
    pid_ = -1;
  }
}

SnapshotWritten ForkedSnapshot::wait() {
  SnapshotWritten out;
  out.checkpoint_id = checkpoint_id_;
  out.file_name = file_name_;
  std::string report;
  char buffer[4096];
  bool timed_out = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - std::chrono::steady_clock::now());
    pollfd readable{report_fd_, POLLIN, 0};
    const int ready = left.count() > 0 ? ::poll(&readable, 1, static_cast<int>(std::min<std::int64_t>(left.count(), 1000))) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      if (std::chrono::steady_clock::now() < deadline_) continue;
      timed_out = true;
      ::kill(pid_, SIGKILL);
      break;
    }
    ssize_t n = ::read(report_fd_, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    report.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(std::exchange(report_fd_, -1));
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {}
  pid_ = -1;

  unsigned long long bytes = 0, raw = 0;
  double seconds = 0;
  const std::size_t newline = report.find('\n');
  const bool complete = WIFEXITED(status) && WEXITSTATUS(status) == 0 && newline != std::string::npos &&
                        std::sscanf(report.c_str(), "%llu %llu %lf", &bytes, &raw, &seconds) == 3;
  if (timed_out) {
    out.error = "the snapshot process did not finish before the checkpoint's timeout: killed";
    return out;
  }
  if (!complete) {
    out.error = WIFSIGNALED(status)
                    ? "the snapshot process was killed by signal " + std::to_string(WTERMSIG(status))
                    : "the snapshot process ended with status " + std::to_string(WEXITSTATUS(status)) +
                          " without reporting";
    return out;
  }
  out.bytes = bytes;
  out.raw_bytes = raw;
  out.seconds = seconds;
  out.error = report.substr(newline + 1);
  return out;
}

} // namespace streamctl::runtime
