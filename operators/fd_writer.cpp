#include "operators/fd_writer.hpp"

#include <cerrno>
#include <cstring>
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

} // namespace streamctl::operators
