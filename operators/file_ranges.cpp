#include "operators/file_ranges.hpp"

#include <cerrno>
#include <cstring>
#include <unistd.h>
#include <vector>

namespace streamctl::operators {

namespace {

constexpr std::size_t kScanBytes = 1 << 20;

// Reads up to `n` bytes at `at` into `buffer`; 0 at the end of the file.
Result<std::size_t> read_at(int fd, char* buffer, std::size_t n, std::uint64_t at) {
  for (;;) {
    ssize_t got = ::pread(fd, buffer, n, static_cast<off_t>(at));
    if (got >= 0) return static_cast<std::size_t>(got);
    if (errno != EINTR) return fail(std::string("cannot read: ") + std::strerror(errno));
  }
}

} // namespace

Result<std::optional<std::uint64_t>> first_line_start(int fd, std::uint64_t from) {
  std::vector<char> buffer(64 << 10);
  for (std::uint64_t at = from - 1;;) {
    auto got = read_at(fd, buffer.data(), buffer.size(), at);
    if (!got) return Failure{got.error()};
    if (*got == 0) return std::optional<std::uint64_t>{};
    if (const void* nl = std::memchr(buffer.data(), '\n', *got))
      return std::optional<std::uint64_t>{at + static_cast<std::uint64_t>(static_cast<const char*>(nl) - buffer.data()) + 1};
    at += *got;
  }
}

Result<std::uint64_t> count_newlines(int fd, std::uint64_t from, std::uint64_t to) {
  std::vector<char> buffer(kScanBytes);
  std::uint64_t lines = 0;
  for (std::uint64_t at = from; at < to;) {
    auto got = read_at(fd, buffer.data(), static_cast<std::size_t>(std::min<std::uint64_t>(buffer.size(), to - at)), at);
    if (!got) return Failure{got.error()};
    if (*got == 0) return fail("the file ends at byte " + std::to_string(at) + ", before byte " + std::to_string(to));
    const char* p = buffer.data();
    const char* end = p + *got;
    while (const void* nl = std::memchr(p, '\n', static_cast<std::size_t>(end - p))) {
      ++lines;
      p = static_cast<const char*>(nl) + 1;
    }
    at += *got;
  }
  return lines;
}

Result<std::string> first_nonblank_line(int fd) {
  std::string pending;
  std::vector<char> buffer(64 << 10);
  for (std::uint64_t at = 0;;) {
    auto got = read_at(fd, buffer.data(), buffer.size(), at);
    if (!got) return Failure{got.error()};
    if (*got == 0) return std::string();
    at += *got;
    pending.append(buffer.data(), *got);
    std::size_t begin = 0;
    for (std::size_t nl; (nl = pending.find('\n', begin)) != std::string::npos; begin = nl + 1) {
      std::string line = pending.substr(begin, nl - begin);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (!line.empty()) return line;
    }
    pending.erase(0, begin);
  }
}

} // namespace streamctl::operators
