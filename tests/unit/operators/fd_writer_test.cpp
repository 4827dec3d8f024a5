#include <catch2/catch.hpp>

#include <cstdlib>
#include <fcntl.h>
#include <string>
#include <unistd.h>

#include "operators/fd_writer.hpp"

using namespace streamctl::operators;

namespace {

std::string read_whole(const std::string& path) {
  std::string out;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    REQUIRE(n >= 0);
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

} // namespace

// The pacer only hints the kernel; what it must never do is change or lose what was written,
// on a file, on a file restarted after reset(), or on a descriptor without writeback (a pipe).
TEST_CASE("writeback pacing leaves every written byte as written", "[sink]") {
  char path[] = "/tmp/streamctl-fd-writer-XXXXXX";
  int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  WritebackPacer pacer;
  std::string expected;
  std::uint64_t size = 0;
  // Chunks of odd sizes, so that whole steps fall inside writes, over three steps in all.
  for (int k = 0; size < 3 * WritebackPacer::step + 12345; ++k) {
    std::string chunk(100000 + static_cast<std::size_t>(k % 7) * 1013, static_cast<char>('a' + k % 26));
    REQUIRE(write_all(fd, chunk));
    expected += chunk;
    size += chunk.size();
    pacer.wrote(fd, size);
  }
  REQUIRE(::fsync(fd) == 0);
  CHECK(read_whole(path) == expected);

  // A new file through the same pacer, after reset().
  REQUIRE(::ftruncate(fd, 0) == 0);
  REQUIRE(::lseek(fd, 0, SEEK_SET) == 0);
  pacer.reset();
  std::string small(WritebackPacer::step + 1, 'z');
  REQUIRE(write_all(fd, small));
  pacer.wrote(fd, small.size());
  REQUIRE(::fsync(fd) == 0);
  CHECK(read_whole(path) == small);
  ::close(fd);
  ::unlink(path);

  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  WritebackPacer on_pipe;
  on_pipe.wrote(pipe_fds[1], 2 * WritebackPacer::step); // sync_file_range fails: no effect
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
}
