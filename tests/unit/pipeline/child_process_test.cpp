#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <fstream>
#include <sstream>
#include <sys/wait.h>
#include <thread>

#include "pipeline/runtime/child_process.hpp"
#include "unit/temp_dir.hpp"

using namespace streamctl::runtime;
using streamctl::testing::TempDir;

namespace {

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// True when the child is still running after `wait` (it has not seen EOF).
bool still_running_after(ChildProcess& child, std::chrono::milliseconds wait) {
  std::this_thread::sleep_for(wait);
  int status = 0;
  if (::waitpid(child.pid(), &status, WNOHANG) != child.pid()) return true;
  child.reaped(status);
  return false;
}

int wait_exit(ChildProcess& child) {
  int status = 0;
  REQUIRE(::waitpid(child.pid(), &status, 0) == child.pid());
  child.reaped(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

} // namespace

// The channel carries the bootstrap bytes, then stays open: the child sees EOF only when the
// parent closes it (a worker behind ssh ends on that EOF).
TEST_CASE("a bootstrap channel delivers its bytes and ends with EOF only when closed", "[child_process]") {
  TempDir dir;
  std::string out = (dir.path / "out").string();
  int fd = GENERATE(0, 3);
  ChildSpec spec;
  spec.executable = "/bin/sh";
  spec.args = {"-c", "cat <&" + std::to_string(fd) + " > '" + out + "'"};
  spec.bootstrap = std::string(200 * 1024, 'x') + "end"; // above a pipe's 64 KiB
  spec.bootstrap_fd = fd;
  ChildProcess child(spec);
  CHECK(still_running_after(child, std::chrono::milliseconds(300)));
  child.close_bootstrap();
  CHECK(wait_exit(child) == 0);
  CHECK(read_file(out) == *spec.bootstrap);
}

// Without a channel, stdin is /dev/null: the child reads EOF at once.
TEST_CASE("a child without a bootstrap channel reads /dev/null", "[child_process]") {
  ChildSpec spec;
  spec.executable = "/bin/sh";
  spec.args = {"-c", "test -z \"$(cat)\""};
  ChildProcess child(spec);
  CHECK(wait_exit(child) == 0);
}

// Another child started later must not inherit our end of the first one's channel, or the
// first child's EOF would wait for the second to exit.
TEST_CASE("a bootstrap channel does not leak into later children", "[child_process]") {
  ChildSpec first;
  first.executable = "/bin/sh";
  first.args = {"-c", "cat > /dev/null"};
  first.bootstrap = "a";
  ChildProcess reader(first);
  ChildSpec second;
  second.executable = "/bin/sleep";
  second.args = {"30"};
  ChildProcess sleeper(second);
  reader.close_bootstrap();
  CHECK(wait_exit(reader) == 0);
}

// The child is cloned with every signal blocked, so that no handler of the parent's runs on the
// memory it shares until exec: the worker must still start with none blocked (a SIGTERM ends
// it), and the parent's own mask must be what it was.
TEST_CASE("a child starts with no signal blocked and the parent keeps its mask", "[child_process]") {
  sigset_t term, before, after;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  REQUIRE(::pthread_sigmask(SIG_BLOCK, &term, &before) == 0);
  ChildSpec spec;
  spec.executable = "/bin/sleep";
  spec.args = {"30"};
  ChildProcess child(spec);
  REQUIRE(::pthread_sigmask(SIG_SETMASK, &before, &after) == 0);
  CHECK(sigismember(&after, SIGTERM) == 1);
  CHECK(sigismember(&after, SIGUSR1) == sigismember(&before, SIGUSR1));
  child.signal(SIGTERM);
  int status = 0;
  REQUIRE(::waitpid(child.pid(), &status, 0) == child.pid());
  child.reaped(status);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGTERM);
}

// A command that cannot be executed ends its child with 127 (the caller reports the exit
// status), never the parent's flow: the child must not return into the parent's frames.
TEST_CASE("a child whose executable is missing exits 127", "[child_process]") {
  ChildSpec spec;
  spec.executable = "/nonexistent/streamctl";
  ChildProcess child(spec);
  CHECK(wait_exit(child) == 127);
}
