#include "pipeline/runtime/checkpoint_dir_lock.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <spdlog/spdlog.h>
#include <sstream>
#include <sys/file.h>
#include <thread>
#include <unistd.h>

#include "state/error.hpp"

namespace streamctl::runtime {

namespace {

using namespace std::chrono_literals;

constexpr auto kPollEvery = 100ms;

bool try_lock(int fd) {
  for (;;) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return true;
    if (errno != EINTR) return false;
  }
}

} // namespace

CheckpointDirLock::CheckpointDirLock(const std::filesystem::path& root, const std::string& file,
                                     std::chrono::milliseconds wait, spdlog::logger* log)
    : root_(root) {
  std::error_code ec;
  std::filesystem::create_directories(root, ec);
  if (ec)
    throw Error(ErrorKind::Usage, file + ": [checkpoint] dir: cannot create '" + root.string() + "': " + ec.message());
  if (::access(root.c_str(), W_OK) != 0)
    throw Error(ErrorKind::Usage,
                file + ": [checkpoint] dir: cannot write '" + root.string() + "': " + std::strerror(errno));
  auto path = root / "lock";
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw Error(ErrorKind::Usage, file + ": [checkpoint] dir: cannot create '" + path.string() +
                                      "': " + std::strerror(errno));
  if (try_lock(fd_)) {
    record_holder({});
    return;
  }
  if (wait.count() > 0) {
    // Polled rather than a blocking flock(): a deadline needs no timer signal, and SIGINT or
    // SIGTERM end the wait as they would end any command that has started nothing yet.
    if (log) log->info("waiting for the lock of '{}' ({})", root.string(), holder_of(path));
    auto deadline = wait == kWaitForever ? std::chrono::steady_clock::time_point::max()
                                         : std::chrono::steady_clock::now() + wait;
    while (std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(kPollEvery);
      if (try_lock(fd_)) {
        record_holder({});
        return;
      }
    }
  }
  auto holder = holder_of(path);
  ::close(fd_);
  throw Error(ErrorKind::Usage, file + ": another run of this job holds the lock of '" + root.string() + "' (" +
                                    holder + "): nothing was started; wait for it to end or stop it, "
                                    "or give this run another [checkpoint] dir");
}

CheckpointDirLock::~CheckpointDirLock() { ::close(fd_); }

void CheckpointDirLock::record_holder(const std::string& job_id) const {
  std::string line = std::to_string(::getpid()) + " " + job_id + "\n";
  // Written before the old content is cut off, so that a reader sees no empty file between.
  if (::pwrite(fd_, line.data(), line.size(), 0) == static_cast<ssize_t>(line.size()))
    (void)::ftruncate(fd_, static_cast<off_t>(line.size()));
}

std::string CheckpointDirLock::holder_of(const std::filesystem::path& lock_file) {
  std::ifstream in(lock_file);
  std::string line;
  std::getline(in, line);
  std::istringstream fields(line);
  long pid = 0;
  std::string job;
  if (!(fields >> pid) || pid <= 0) return "its holder unknown";
  fields >> job;
  return "pid " + std::to_string(pid) + ", job " + (job.empty() ? std::string("not registered yet") : job);
}

} // namespace streamctl::runtime
