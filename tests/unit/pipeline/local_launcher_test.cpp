#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/wait.h>

#include "pipeline/runtime/local_launcher.hpp"
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

// A stand-in for streamctl: records its arguments and environment, and copies the descriptor
// after `--bootstrap-fd` (none: stdin) into `boot`.
std::filesystem::path fake_streamctl(const TempDir& dir) {
  auto path = dir.path / "streamctl";
  std::ofstream script(path);
  script << "#!/bin/sh\n"
         << "cd '" << dir.path.string() << "'\n"
         << "printf '%s\\n' \"$@\" > args\n"
         << "printf '%s' \"$GLIBC_TUNABLES\" > tunables\n"
         << "fd=0; prev=; for a in \"$@\"; do [ \"$prev\" = --bootstrap-fd ] && fd=$a; prev=$a; done\n"
         << "if [ \"$fd\" = 3 ]; then cat <&3; else cat; fi > boot\n";
  script.close();
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  return path;
}

int wait_exit(ChildProcess& child) {
  int status = 0;
  REQUIRE(::waitpid(child.pid(), &status, 0) == child.pid());
  child.reaped(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

} // namespace

TEST_CASE("the local launcher runs `streamctl worker ARGS` with the bootstrap on stdin",
          "[launcher]") {
  TempDir dir;
  ::unsetenv("GLIBC_TUNABLES");
  LocalLauncher launcher(fake_streamctl(dir).string());
  CHECK(launcher.name() == "local");
  CHECK(launcher.prepare().empty());
  WorkerLaunch launch;
  launch.worker_args = {"--task", "2"};
  launch.bootstrap = "pipeline and keys";
  auto child = launcher.start(launch);
  child->close_bootstrap(); // the worker has read it; EOF lets the stand-in end
  CHECK(wait_exit(*child) == 0);
  CHECK(read_file(dir.path / "args") == "worker\n--task\n2\n--bootstrap-fd\n0\n");
  CHECK(read_file(dir.path / "boot") == "pipeline and keys");
  CHECK(read_file(dir.path / "tunables") == "glibc.malloc.hugetlb=1");
}

// A worker of the stdin source keeps the coordinator's stdin on 0: its bootstrap comes on 3.
TEST_CASE("the local launcher puts the bootstrap on descriptor 3 beside an inherited stdin",
          "[launcher]") {
  TempDir dir;
  LocalLauncher launcher(fake_streamctl(dir).string());
  WorkerLaunch launch;
  launch.inherit_stdin = true;
  launch.bootstrap = "on three";
  auto child = launcher.start(launch);
  child->close_bootstrap();
  CHECK(wait_exit(*child) == 0);
  CHECK(read_file(dir.path / "boot") == "on three");
  CHECK(read_file(dir.path / "args") == "worker\n--bootstrap-fd\n3\n");
}

// No bootstrap bytes (today's workers read the pipeline from the job directory): no channel,
// and stdin is /dev/null as before.
TEST_CASE("the local launcher opens no bootstrap channel without bootstrap bytes", "[launcher]") {
  TempDir dir;
  LocalLauncher launcher(fake_streamctl(dir).string());
  WorkerLaunch launch;
  launch.worker_args = {"--task", "0"};
  auto child = launcher.start(launch);
  CHECK(wait_exit(*child) == 0);
  CHECK(read_file(dir.path / "boot").empty());
  CHECK(read_file(dir.path / "args") == "worker\n--task\n0\n");
}
