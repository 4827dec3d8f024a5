#include "operators/spool.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <random>
#include <unistd.h>

#include "operators/fd_writer.hpp"

namespace streamctl::operators {

namespace {
[[noreturn]] void fail_io(const std::string& what, const std::filesystem::path& path) {
  throw Error(ErrorKind::JobFailed, "spool: " + what + " '" + path.string() + "': " + std::strerror(errno));
}
} // namespace

Spool::Spool(const std::filesystem::path& dir, const std::string& prefix) : buffer_(1 << 16) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    errno = ec.value();
    fail_io("cannot create directory", dir);
  }
  std::random_device random;
  for (int attempt = 0; attempt < 100 && fd_ < 0; ++attempt) {
    std::uint64_t r = (static_cast<std::uint64_t>(random()) << 32) ^ random();
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(r));
    name_ = prefix + "-" + hex + ".spool";
    path_ = dir / name_;
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    if (fd_ < 0 && errno != EEXIST) fail_io("cannot create", path_);
  }
  if (fd_ < 0) fail_io("cannot create", path_);
  // The new name must survive a crash for a checkpoint to name it.
  int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
}

Spool::~Spool() {
  if (fd_ >= 0) ::close(fd_);
}

bool Spool::valid_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

Result<void> Spool::copy_tail(const std::filesystem::path& from, std::uint64_t offset) {
  int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return fail("cannot open spool file '" + from.string() + "': " + std::strerror(errno));
  off_t end = ::lseek(in, 0, SEEK_END);
  if (end < 0 || static_cast<std::uint64_t>(end) < offset) {
    ::close(in);
    return fail("spool file '" + from.string() + "' has " + std::to_string(end) + " bytes, fewer than the " +
                std::to_string(offset) + " already read");
  }
  off_t at = static_cast<off_t>(offset);
  for (;;) {
    ssize_t n = ::pread(in, buffer_.data(), buffer_.size(), at);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      std::string reason = std::strerror(errno);
      ::close(in);
      return fail("cannot read spool file '" + from.string() + "': " + reason);
    }
    if (n == 0) break;
    auto written = write_all(fd_, std::string_view(buffer_.data(), static_cast<std::size_t>(n)));
    if (!written) {
      ::close(in);
      return fail("cannot write spool file '" + path_.string() + "': " + written.error());
    }
    size_ += static_cast<std::uint64_t>(n);
    at += n;
  }
  ::close(in);
  return {};
}

Spool::Pump Spool::pump(int in_fd, std::size_t max_bytes) {
  std::size_t moved = 0;
  while (moved < max_bytes) {
    pollfd p{in_fd, POLLIN, 0};
    int ready = ::poll(&p, 1, 0);
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) break;
    ssize_t n = ::read(in_fd, buffer_.data(), buffer_.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      throw Error(ErrorKind::JobFailed, std::string("spool: read failed: ") + std::strerror(errno));
    }
    if (n == 0) return Pump::End;
    auto written = write_all(fd_, std::string_view(buffer_.data(), static_cast<std::size_t>(n)));
    if (!written) throw Error(ErrorKind::JobFailed, "spool: cannot write '" + path_.string() + "': " + written.error());
    size_ += static_cast<std::uint64_t>(n);
    moved += static_cast<std::size_t>(n);
  }
  return moved > 0 ? Pump::Read : Pump::WouldBlock;
}

void Spool::sync() const {
  if (::fsync(fd_) != 0) fail_io("cannot fsync", path_);
}

int Spool::open_reader() const {
  int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail_io("cannot open", path_);
  return fd;
}

} // namespace streamctl::operators
