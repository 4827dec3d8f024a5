#include "state/durable_file.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace streamctl::state {

namespace {
Failure io_failure(const std::filesystem::path& path, const char* what, int err) {
  return Failure{path.string() + ": " + what + ": " + std::strerror(err)};
}
} // namespace

Result<void> sync_directory(const std::filesystem::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return io_failure(dir, "cannot open the directory", errno);
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) return io_failure(dir, "cannot fsync the directory", err);
  return {};
}

Result<void> write_file_durably(const std::filesystem::path& path, std::string_view bytes) {
  std::filesystem::path dir = path.parent_path().empty() ? "." : path.parent_path();
  std::string temp = (dir / ("." + path.filename().string() + ".tmp-XXXXXX")).string();
  int fd = ::mkstemp(temp.data());
  if (fd < 0) return io_failure(path, "cannot create a temporary file", errno);
  auto undo = [&](const char* what, int err) {
    ::close(fd);
    ::unlink(temp.c_str());
    return io_failure(path, what, err);
  };
  for (std::size_t done = 0; done < bytes.size();) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return undo("cannot write", errno);
    done += static_cast<std::size_t>(n);
  }
  if (::fchmod(fd, 0644) != 0) return undo("cannot chmod", errno);
  if (::fsync(fd) != 0) return undo("cannot fsync", errno);
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(temp.c_str());
    return io_failure(path, "cannot close", err);
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(temp.c_str());
    return io_failure(path, "cannot rename into place", err);
  }
  return sync_directory(dir);
}

} // namespace streamctl::state
