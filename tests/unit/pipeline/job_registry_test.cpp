// Regression tests for issue 7, finding 6: a job name of 56 characters or more made the
// socket path longer than a Unix socket's 107 bytes ("File name too long", exit 1), and the
// failed run left an empty streamctl-NAME-... directory in $TMPDIR.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <set>
#include <string>
#include <vector>
#include <unistd.h>

#include "pipeline/runtime/job_registry.hpp"

using namespace streamctl;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "job-registry-test-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

pipeline::PipelineSpec spec_named(const std::string& name) {
  pipeline::PipelineSpec spec;
  spec.name = name;
  spec.file = "p.toml";
  spec.base_dir = fs::current_path();
  return spec;
}

} // namespace

TEST_CASE("socket paths fit a Unix socket whatever the job name's length", "[job_registry]") {
  TempDir state;
  for (std::size_t length : {1, 56, 60, 128}) {
    runtime::JobRegistration job(state.path / std::string(100, 'd'),
                                 spec_named(std::string(length, 'n')));
    INFO("name of " << length << " characters: " << job.socket_dir());
    CHECK((job.socket_dir() / "task-4294967295-4294967295.sock").string().size() <= 107);
    CHECK(fs::is_directory(job.socket_dir()));
  }
}

TEST_CASE("a job that never wrote job.json leaves no directory behind", "[job_registry]") {
  TempDir state;
  fs::path job_dir, socket_dir;
  {
    runtime::JobRegistration job(state.path / std::string(100, 'd'),
                                 spec_named(std::string(60, 'n')));
    job_dir = job.dir();
    socket_dir = job.socket_dir();
    job.write_pipeline("name = \"x\"\n", {});
    CHECK(fs::exists(job_dir));
  }
  CHECK_FALSE(fs::exists(job_dir));
  CHECK_FALSE(fs::exists(socket_dir));
}

TEST_CASE("a job that wrote job.json keeps it and loses only its sockets", "[job_registry]") {
  TempDir state;
  fs::path job_dir, socket_dir;
  {
    runtime::JobRegistration job(state.path, spec_named("short"));
    job_dir = job.dir();
    socket_dir = job.socket_dir();
    job.update("failed", {{"g[0]", 0}, {"g[1]", 1234}});
  }
  CHECK(fs::exists(job_dir / "job.json"));
  CHECK_FALSE(fs::exists(socket_dir));
  // A worker that has exited has no pid (finding 9: status showed the pid of a dead worker).
  std::ifstream in(job_dir / "job.json");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK_THAT(text, Catch::Contains(R"({"task": "g[0]", "host": "localhost", "pid": null})"));
  CHECK_THAT(text, Catch::Contains(R"({"task": "g[1]", "host": "localhost", "pid": 1234})"));
}

// Regression: a new job's id is name-time-XXXX with 16 random bits, and a job whose id was
// already taken (two runs of one name in the same second) reused the other job's directory,
// overwriting its job.json (CI's e2e housekeeping, 24 runs in 5 s, lost a job that way).
TEST_CASE("jobs of one name started in the same second get directories of their own", "[job_registry]") {
  TempDir state;
  std::vector<std::unique_ptr<runtime::JobRegistration>> jobs;
  std::set<std::string> ids;
  // 600 in about a second: among 65536 suffixes some are drawn twice (p ~ 0.9 per run).
  for (int k = 0; k < 600; ++k) {
    jobs.push_back(std::make_unique<runtime::JobRegistration>(state.path, spec_named("same")));
    jobs.back()->update("running", {});
    ids.insert(jobs.back()->id());
  }
  CHECK(ids.size() == 600);
  CHECK(static_cast<std::size_t>(std::distance(fs::directory_iterator(state.path / "jobs"), fs::directory_iterator())) == 600);
}
