// The job's lock (issue 11): a second holder is refused naming the first one's pid and job, a
// lock file left behind by a run that is gone holds nothing back, and a bounded wait gives up
// at its deadline while a wait for a lock that is released goes on. flock(2) locks belong to
// an open file, so two CheckpointDirLock objects of one process exclude each other as two
// processes would.
#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <unistd.h>

#include "pipeline/runtime/checkpoint_dir_lock.hpp"
#include "state/error.hpp"
#include "tests/unit/temp_dir.hpp"

using namespace streamctl;
using runtime::CheckpointDirLock;
using namespace std::chrono_literals;

namespace {

// The message of the Error that taking the lock throws, or "" when it is taken.
std::string refusal(const std::filesystem::path& root, std::chrono::milliseconds wait = 0ms) {
  try {
    CheckpointDirLock lock(root, "job.toml", wait);
    return "";
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Usage); // exit 2, as for any locked checkpoint directory
    return e.what();
  }
}

} // namespace

TEST_CASE("a held lock refuses another holder, naming the first one's pid and job") {
  testing::TempDir dir;
  auto root = dir.path / "checkpoints" / "views";
  auto first = std::make_unique<CheckpointDirLock>(root, "job.toml");
  std::string pid = std::to_string(::getpid());
  // Before the job is registered: the pid alone.
  CHECK(refusal(root) == "job.toml: another run of this job holds the lock of '" + root.string() + "' (pid " +
                             pid + ", job not registered yet): nothing was started; wait for it to end or "
                             "stop it, or give this run another [checkpoint] dir");
  first->record_holder("views-20261202-101500-0a1b");
  CHECK_THAT(refusal(root), Catch::Contains("(pid " + pid + ", job views-20261202-101500-0a1b)"));
  // A shorter id than the last one written: no tail of the old one is left.
  first->record_holder("v-1");
  CHECK_THAT(refusal(root), Catch::Contains("(pid " + pid + ", job v-1)"));
  first.reset();
  CHECK(refusal(root).empty());
}

TEST_CASE("a lock file whose holder is gone is taken") {
  testing::TempDir dir;
  auto root = dir.path / "views";
  std::filesystem::create_directories(root);
  std::ofstream(root / "lock") << "999999 views-gone\n"; // as a run killed -9 leaves it
  CheckpointDirLock lock(root, "job.toml");
  lock.record_holder("views-new");
  std::ifstream in(root / "lock");
  std::string line;
  std::getline(in, line);
  CHECK(line == std::to_string(::getpid()) + " views-new");
}

TEST_CASE("the holder of a lock file that names none is unknown") {
  testing::TempDir dir;
  std::ofstream(dir.path / "lock") << "";
  CHECK(CheckpointDirLock::holder_of(dir.path / "lock") == "its holder unknown");
  std::ofstream(dir.path / "lock") << "garbage\n";
  CHECK(CheckpointDirLock::holder_of(dir.path / "lock") == "its holder unknown");
  CHECK(CheckpointDirLock::holder_of(dir.path / "missing") == "its holder unknown");
}

TEST_CASE("a bounded wait gives up at its deadline; a wait for a lock that is released goes on") {
  testing::TempDir dir;
  auto first = std::make_unique<CheckpointDirLock>(dir.path, "job.toml");
  auto started = std::chrono::steady_clock::now();
  CHECK_THAT(refusal(dir.path, 300ms), Catch::Contains("holds the lock"));
  CHECK(std::chrono::steady_clock::now() - started >= 300ms);

  std::thread releaser([&] {
    std::this_thread::sleep_for(200ms);
    first.reset();
  });
  CHECK(refusal(dir.path, CheckpointDirLock::kWaitForever).empty());
  releaser.join();
}
