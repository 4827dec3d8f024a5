#include "pipeline/runtime/checkpoint_dir_lock.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "state/error.hpp"

namespace streamctl::runtime {

CheckpointDirLock::CheckpointDirLock(const std::filesystem::path& root, const std::string& file) {
  std::error_code ec;
  std::filesystem::create_directories(root, ec);
  if (ec)
    throw Error(ErrorKind::Usage, file + ": [checkpoint] dir: cannot create '" + root.string() + "': " + ec.message());
  if (::access(root.c_str(), W_OK) != 0)
    throw Error(ErrorKind::Usage,
                file + ": [checkpoint] dir: cannot write '" + root.string() + "': " + std::strerror(errno));
  fd_ = ::open((root / "lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw Error(ErrorKind::Usage, file + ": [checkpoint] dir: cannot create '" + (root / "lock").string() +
                                      "': " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd_);
    throw Error(ErrorKind::Usage, file + ": another run of this job is taking checkpoints in '" + root.string() +
                                      "' (its lock is held); stop it first, or set [checkpoint] dir");
  }
}

CheckpointDirLock::~CheckpointDirLock() { ::close(fd_); }

} // namespace streamctl::runtime
