// list_live_jobs reads only the job.json files that may say a job runs (every `run` counts the
// workers of running jobs, and a state dir keeps every job cron ever ran): it must find the
// same running jobs as list_jobs does, whatever else the directory holds.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>
#include <unistd.h>

#include "pipeline/runtime/job_directory.hpp"
#include "unit/temp_dir.hpp"

using namespace streamctl;
using streamctl::testing::TempDir;
namespace fs = std::filesystem;

namespace {

void write_job(const fs::path& state, const std::string& id, const std::string& json) {
  fs::create_directories(state / "jobs" / id);
  std::ofstream(state / "jobs" / id / "job.json") << json;
}

std::string job_json(const std::string& id, const std::string& state, long pid, const std::string& extra = "") {
  return "{\n  \"id\": \"" + id + "\",\n  \"name\": \"n\",\n  \"state\": \"" + state +
         "\",\n  \"started\": \"2026-12-06T10:00:0" + id.back() + "Z\",\n  \"coordinator_pid\": " +
         std::to_string(pid) + extra + ",\n  \"tasks\": [{\"task\": \"0\", \"host\": \"\", \"pid\": " +
         std::to_string(pid) + "}]\n}\n";
}

std::vector<std::string> ids(const std::vector<runtime::JobEntry>& jobs) {
  std::vector<std::string> out;
  for (const auto& j : jobs) out.push_back(j.id);
  return out;
}

} // namespace

TEST_CASE("list_live_jobs finds the running jobs that list_jobs finds, reading fewer", "[job_directory]") {
  TempDir state;
  const long me = ::getpid();
  const long gone = 0; // never a live process
  write_job(state.path, "job-1", job_json("job-1", "running", me));
  write_job(state.path, "job-2", job_json("job-2", "finished", me));
  write_job(state.path, "job-3", job_json("job-3", "restarting", me));
  // Running, but its coordinator is gone: failed, as list_jobs reads it.
  write_job(state.path, "job-4", job_json("job-4", "running", gone));
  // The words elsewhere (a warning) do not make an ended job live.
  write_job(state.path, "job-5",
            job_json("job-5", "stopped", me, ",\n  \"warnings\": [\"was running; restarting it failed\"]"));
  write_job(state.path, "job-6", "{ not json running");
  fs::create_directories(state.path / "jobs" / "job-7"); // no job.json
  write_job(state.path, "job-8", job_json("job-8", "cancelled", me));

  std::vector<std::string> from_all;
  for (const auto& j : runtime::list_jobs(state.path, false))
    if (j.state == "running" || j.state == "restarting") from_all.push_back(j.id);
  const std::vector<std::string> live = ids(runtime::list_live_jobs(state.path));
  CHECK(live == std::vector<std::string>{"job-1", "job-3"});
  CHECK(live == from_all);
  const auto jobs = runtime::list_live_jobs(state.path);
  REQUIRE(jobs.size() == 2);
  CHECK(jobs[0].tasks.size() == 1);
  CHECK(jobs[0].tasks[0].pid == me);

  // No jobs directory at all: nothing, no error.
  TempDir empty;
  CHECK(runtime::list_live_jobs(empty.path).empty());
}
