#include "operators/fd_writer.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace streamctl::operators {

Result<void> write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(std::strerror(errno));
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return {};
}

void WritebackPacer::wrote(int fd, std::uint64_t size) {
  if (size < started_ + step) return;
  const std::uint64_t to = size / step * step;
  // Advisory: on a file system without it (EINVAL, ESPIPE for a pipe) the fsync does it all.
  ::sync_file_range(fd, static_cast<off_t>(started_), static_cast<off_t>(to - started_), SYNC_FILE_RANGE_WRITE);
  started_ = to;
}

} // namespace streamctl::operators
