#include "operators/spool.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include "state/durable_file.hpp"

namespace streamctl::operators {

namespace {
[[noreturn]] void fail_io(const std::string& what, const std::filesystem::path& path) {
  throw Error(ErrorKind::JobFailed, "spool: " + what + " '" + path.string() + "': " + std::strerror(errno));
}

void make_spool_directory(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    errno = ec.value();
    fail_io("cannot create directory", dir);
  }
}

// pwrite(2) of all of `bytes` at `offset`; false with errno set when it cannot.
bool pwrite_all(int fd, const char* bytes, std::size_t size, std::uint64_t offset) {
  while (size > 0) {
    ssize_t n = ::pwrite(fd, bytes, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    bytes += n;
    size -= static_cast<std::size_t>(n);
    offset += static_cast<std::uint64_t>(n);
  }
  return true;
}
} // namespace

Spool::Spool(std::filesystem::path dir, std::string name, int fd)
    : path_(dir / name), name_(std::move(name)), fd_(fd), buffer_(1 << 16) {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    int saved = errno;
    ::close(fd_);
    errno = saved;
    fail_io("cannot stat", path_);
  }
  size_ = static_cast<std::uint64_t>(st.st_size);
}

std::unique_ptr<Spool> Spool::open(const std::filesystem::path& dir, const std::string& name) {
  make_spool_directory(dir);
  // Not O_APPEND: splice(2) refuses files opened for appending; writes go to size_.
  int fd = ::open((dir / name).c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) fail_io("cannot open", dir / name);
  // The name must survive a crash for a checkpoint to name it.
  (void)state::sync_directory(dir);
  return std::unique_ptr<Spool>(new Spool(dir, name, fd));
}

Result<std::unique_ptr<Spool>> Spool::create_from_tail(const std::filesystem::path& dir, const std::string& name,
                                                       const std::filesystem::path& from, std::uint64_t offset) {
  make_spool_directory(dir);
  int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return fail("cannot open spool file '" + from.string() + "': " + std::strerror(errno));
  off_t end = ::lseek(in, 0, SEEK_END);
  if (end < 0 || static_cast<std::uint64_t>(end) < offset) {
    ::close(in);
    return fail("spool file '" + from.string() + "' has " + std::to_string(end) + " bytes, fewer than the " +
                std::to_string(offset) + " already read");
  }
  // A worker killed half-way leaves only the temporary file (the janitor deletes it).
  std::filesystem::path temporary = dir / (name + ".tmp");
  int out = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) {
    std::string reason = std::strerror(errno);
    ::close(in);
    return fail("cannot create spool file '" + temporary.string() + "': " + reason);
  }
  std::vector<char> buffer(1 << 20);
  std::string error;
  std::uint64_t at = offset, written = 0;
  for (;;) {
    ssize_t n = ::pread(in, buffer.data(), buffer.size(), static_cast<off_t>(at));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      error = "cannot read spool file '" + from.string() + "': " + std::strerror(errno);
      break;
    }
    if (n == 0) break;
    if (!pwrite_all(out, buffer.data(), static_cast<std::size_t>(n), written)) {
      error = "cannot write spool file '" + temporary.string() + "': " + std::strerror(errno);
      break;
    }
    at += static_cast<std::uint64_t>(n);
    written += static_cast<std::uint64_t>(n);
  }
  ::close(in);
  if (error.empty() && ::fsync(out) != 0) error = "cannot fsync '" + temporary.string() + "': " + std::strerror(errno);
  ::close(out);
  if (error.empty() && ::rename(temporary.c_str(), (dir / name).c_str()) != 0)
    error = "cannot rename '" + temporary.string() + "': " + std::strerror(errno);
  if (!error.empty()) {
    ::unlink(temporary.c_str());
    return fail(error);
  }
  return open(dir, name);
}

Result<std::unique_ptr<Spool>> Spool::create_from_bytes(const std::filesystem::path& dir, const std::string& name,
                                                        std::string_view bytes) {
  make_spool_directory(dir);
  std::filesystem::path temporary = dir / (name + ".tmp");
  int out = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) return fail("cannot create spool file '" + temporary.string() + "': " + std::strerror(errno));
  std::string error;
  if (!pwrite_all(out, bytes.data(), bytes.size(), 0))
    error = "cannot write spool file '" + temporary.string() + "': " + std::strerror(errno);
  if (error.empty() && ::fsync(out) != 0) error = "cannot fsync '" + temporary.string() + "': " + std::strerror(errno);
  ::close(out);
  if (error.empty() && ::rename(temporary.c_str(), (dir / name).c_str()) != 0)
    error = "cannot rename '" + temporary.string() + "': " + std::strerror(errno);
  if (!error.empty()) {
    ::unlink(temporary.c_str());
    return fail(error);
  }
  return open(dir, name);
}

Spool::~Spool() {
  if (fd_ >= 0) ::close(fd_);
}

bool Spool::valid_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

std::string Spool::safe_part(const std::string& text) {
  std::string out;
  for (char c : text) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-') ? c : '_';
  return out;
}

std::string Spool::file_name(const std::string& prefix, const std::string& run, const std::string& origin) {
  return safe_part(prefix) + "." + safe_part(run) + (origin.empty() ? "" : "." + safe_part(origin)) + ".spool";
}

std::string Spool::run_of(const std::string& name) {
  constexpr std::string_view ext = ".spool";
  if (name.size() <= ext.size() || name.compare(name.size() - ext.size(), ext.size(), ext) != 0) return {};
  std::string stem = name.substr(0, name.size() - ext.size());
  auto first = stem.find('.');
  if (first == std::string::npos || first == 0) return {};
  auto second = stem.find('.', first + 1);
  std::string run = stem.substr(first + 1, second == std::string::npos ? std::string::npos : second - first - 1);
  if (run.empty() || run != safe_part(run)) return {};
  if (second != std::string::npos) {
    std::string origin = stem.substr(second + 1);
    if (origin.empty() || origin != safe_part(origin)) return {};
  }
  return run;
}

long Spool::move_once(int in_fd, std::size_t max_bytes) {
  if (mover_ == Mover::Unknown) {
    struct stat st {};
    mover_ = ::fstat(in_fd, &st) != 0 ? Mover::ReadWrite
             : S_ISFIFO(st.st_mode)   ? Mover::Splice
             : S_ISREG(st.st_mode)    ? Mover::CopyRange
                                      : Mover::ReadWrite;
  }
  for (;;) {
    auto out_offset = static_cast<loff_t>(size_);
    ssize_t n = -1;
    if (mover_ == Mover::Splice) {
      n = ::splice(in_fd, nullptr, fd_, &out_offset, max_bytes, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    } else if (mover_ == Mover::CopyRange) {
      // Takes from in_fd's file offset, which the coordinator and every attempt share.
      n = ::copy_file_range(in_fd, nullptr, fd_, &out_offset, max_bytes, 0);
    } else {
      n = ::read(in_fd, buffer_.data(), std::min(max_bytes, buffer_.size()));
      if (n > 0 && !pwrite_all(fd_, buffer_.data(), static_cast<std::size_t>(n), size_))
        throw Error(ErrorKind::JobFailed, "spool: cannot write '" + path_.string() + "': " + std::strerror(errno));
    }
    if (n >= 0) {
      size_ += static_cast<std::uint64_t>(n);
      return n;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return -1;
    // The file system cannot take spliced or copied bytes (nothing was moved): read them.
    if (mover_ != Mover::ReadWrite &&
        (errno == EINVAL || errno == EXDEV || errno == ENOSYS || errno == EOPNOTSUPP || errno == EBADF)) {
      mover_ = Mover::ReadWrite;
      continue;
    }
    if (errno == ENOSPC || errno == EDQUOT || errno == EIO || errno == EFBIG)
      throw Error(ErrorKind::JobFailed, "spool: cannot write '" + path_.string() + "': " + std::strerror(errno));
    throw Error(ErrorKind::JobFailed, std::string("spool: read failed: ") + std::strerror(errno));
  }
}

Spool::Pump Spool::pump(int in_fd, std::size_t max_bytes) {
  std::size_t moved = 0;
  while (moved < max_bytes) {
    pollfd p{in_fd, POLLIN, 0};
    int ready = ::poll(&p, 1, 0);
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) break;
    long n = move_once(in_fd, std::min<std::size_t>(max_bytes - moved, 1 << 20));
    if (n < 0) break;
    if (n == 0) return Pump::End;
    moved += static_cast<std::size_t>(n);
  }
  return moved > 0 ? Pump::Read : Pump::WouldBlock;
}

void Spool::append(std::string_view bytes) {
  if (!pwrite_all(fd_, bytes.data(), bytes.size(), size_)) fail_io("cannot write", path_);
  size_ += bytes.size();
}

void Spool::sync() const {
  if (::fsync(fd_) != 0) fail_io("cannot fsync", path_);
}

int Spool::open_reader() const {
  int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail_io("cannot open", path_);
  return fd;
}

std::string Spool::read_from(std::uint64_t offset) const {
  std::string out;
  if (offset >= size_) return out;
  out.resize(static_cast<std::size_t>(size_ - offset));
  int fd = open_reader();
  std::size_t done = 0;
  while (done < out.size()) {
    ssize_t n = ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int saved = n < 0 ? errno : EIO; // shorter than written: someone truncated it
      ::close(fd);
      errno = saved;
      fail_io("cannot read", path_);
    }
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  return out;
}

} // namespace streamctl::operators
