#include <catch2/catch.hpp>

#include <cerrno>
#include <csignal>
#include <fstream>
#include <iterator>
#include <poll.h>
#include <string>
#include <unistd.h>

#include "operators/connectors/piped_child.hpp"
#include "state/error.hpp"

using streamctl::connectors::command_text;
using streamctl::connectors::PipedChild;
using streamctl::connectors::PipedChildSpec;

namespace {

PipedChildSpec shell(const std::string& script) {
  PipedChildSpec spec;
  spec.argv = {"sh", "-c", script};
  spec.env = {"PATH=/usr/bin:/bin"};
  return spec;
}

// Reads `fd` (non-blocking) until EOF, waiting on poll.
std::string read_to_end(int fd) {
  std::string out;
  char buffer[4096];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n > 0) {
      out.append(buffer, static_cast<std::size_t>(n));
      continue;
    }
    if (n == 0) return out;
    if (errno != EAGAIN) FAIL("read failed");
    pollfd p{fd, POLLIN, 0};
    ::poll(&p, 1, 5000);
  }
}

// Whether `pid` runs: it exists and is no zombie (a container's init may not reap orphans).
bool running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  auto close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() && text[close + 2] != 'Z';
}

} // namespace

TEST_CASE("piped child: stdin to stdout, stderr apart, exit status", "[connectors]") {
  PipedChild child(shell("cat; echo oops >&2; exit 3"));
  REQUIRE(::write(child.stdin_fd(), "a\nb\n", 4) == 4);
  child.close_stdin();
  CHECK(read_to_end(child.stdout_fd()) == "a\nb\n");
  CHECK(read_to_end(child.stderr_fd()) == "oops\n");
  auto status = child.exit_status(std::chrono::seconds(5));
  REQUIRE(status);
  CHECK(PipedChild::describe(*status) == "exited with status 3");
}

TEST_CASE("piped child: the environment and the working directory are the spec's", "[connectors]") {
  auto spec = shell("echo \"$GREETING\"; pwd");
  spec.env.push_back("GREETING=hi there");
  spec.working_dir = "/tmp";
  PipedChild child(spec);
  CHECK(read_to_end(child.stdout_fd()) == "hi there\n/tmp\n");
}

TEST_CASE("piped child: a command that cannot start is an error naming it", "[connectors]") {
  PipedChildSpec spec;
  spec.argv = {"no-such-program-here", "x"};
  spec.env = {"PATH=/usr/bin:/bin"};
  CHECK_THROWS_WITH(
      PipedChild(spec),
      "cannot start command no-such-program-here x: 'no-such-program-here' not found in PATH");
  spec.argv = {"/etc/hostname"}; // exists, not executable
  CHECK_THROWS_WITH(PipedChild(spec), Catch::Contains("cannot start command /etc/hostname"));
  auto in_missing_dir = shell("true");
  in_missing_dir.working_dir = "/no/such/dir";
  CHECK_THROWS_WITH(PipedChild(in_missing_dir), Catch::Contains("cannot enter directory /no/such/dir: No such file or directory"));
}

TEST_CASE("piped child: the destructor ends the whole process group", "[connectors]") {
  pid_t leader = 0;
  pid_t grandchild = 0;
  {
    // The shell ignores SIGTERM and starts a grandchild: both must still go.
    PipedChild child(shell("trap '' TERM; sleep 300 & echo $!; wait"));
    leader = child.pid();
    std::string line;
    char c = 0;
    while (line.find('\n') == std::string::npos) {
      pollfd p{child.stdout_fd(), POLLIN, 0};
      REQUIRE(::poll(&p, 1, 5000) == 1);
      REQUIRE(::read(child.stdout_fd(), &c, 1) == 1);
      line += c;
    }
    grandchild = static_cast<pid_t>(std::stol(line));
  }
  CHECK_FALSE(running(leader));
  bool gone = false;
  for (int k = 0; k < 100 && !gone; ++k) {
    gone = !running(grandchild);
    if (!gone) ::usleep(10'000);
  }
  CHECK(gone);
}

TEST_CASE("piped child: command_text quotes what a shell would split", "[connectors]") {
  CHECK(command_text({"python3", "my udf.py", "--n=3"}) == "python3 'my udf.py' --n=3");
  CHECK(command_text({"sh", "-c", "it's"}) == "sh -c 'it'\\''s'");
}
