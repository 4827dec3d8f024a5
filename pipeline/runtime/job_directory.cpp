#include "pipeline/runtime/job_directory.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <thread>
#include <unistd.h>

#include "state/batch.hpp"
#include "state/error.hpp"
#include "state/field_names.hpp"
#include "state/json_reader.hpp"

namespace streamctl::runtime {

namespace {

std::string string_of(const state::Value* v) {
  return v && v->kind == state::Kind::String ? std::string(v->s, v->size) : std::string();
}
long int_of(const state::Value* v) { return v && v->kind == state::Kind::Int ? static_cast<long>(v->i) : 0; }

const state::Value* member(const state::Value& map, state::FieldId name) {
  if (map.kind != state::Kind::Map) return nullptr;
  for (std::uint32_t k = 0; k < map.size; ++k)
    if (map.map[k].name == name) return &map.map[k].value;
  return nullptr;
}

// The whole of a small file, or nullopt when it cannot be read. Plain read(2): an ifstream and
// a stringstream cost more than the read itself, for each of hundreds of job.json files.
std::optional<std::string> read_small_file(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string text;
  char buffer[16384];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      if (n < 0) return std::nullopt;
      return text;
    }
    text.append(buffer, static_cast<std::size_t>(n));
  }
}

// `content` is dir's job.json.
std::optional<JobEntry> parse_job(const std::filesystem::path& dir, const std::string& content,
                                  bool final_report) {
  state::FieldNames names;
  state::Batch batch;
  auto parsed = state::parse_json_value(content, names, batch);
  if (!parsed || parsed->kind != state::Kind::Map) return std::nullopt;
  const state::Value& job = *parsed;
  JobEntry entry;
  entry.dir = dir;
  entry.id = string_of(member(job, names.intern("id")));
  entry.name = string_of(member(job, names.intern("name")));
  entry.state = string_of(member(job, names.intern("state")));
  entry.started = string_of(member(job, names.intern("started")));
  entry.updated = string_of(member(job, names.intern("updated")));
  entry.coordinator_pid = int_of(member(job, names.intern("coordinator_pid")));
  entry.control = string_of(member(job, names.intern("control")));
  entry.last_checkpoint = string_of(member(job, names.intern("last_checkpoint")));
  entry.pipeline_file = string_of(member(job, names.intern("pipeline_file")));
  entry.base_dir = string_of(member(job, names.intern("base_dir")));
  if (const state::Value* tasks = member(job, names.intern("tasks")); tasks && tasks->kind == state::Kind::Array)
    for (std::uint32_t k = 0; k < tasks->size; ++k)
      entry.tasks.push_back(JobTaskEntry{string_of(member(tasks->array[k], names.intern("task"))),
                                         string_of(member(tasks->array[k], names.intern("host"))),
                                         int_of(member(tasks->array[k], names.intern("pid")))});
  if (const state::Value* f = member(job, names.intern("failure")); f && f->kind == state::Kind::Map)
    entry.failure = FailureCause{string_of(member(*f, names.intern("node"))), string_of(member(*f, names.intern("task"))),
                                 string_of(member(*f, names.intern("message"))), string_of(member(*f, names.intern("time")))};
  if (const state::Value* w = member(job, names.intern("warnings")); w && w->kind == state::Kind::Array)
    for (std::uint32_t k = 0; k < w->size; ++k) entry.warnings.push_back(string_of(&w->array[k]));
  if (std::ifstream operators; final_report && (operators.open(dir / "operators.json"), operators)) {
    std::ostringstream operators_text;
    operators_text << operators.rdbuf();
    entry.final_operators = operators_text.str();
    while (!entry.final_operators.empty() && entry.final_operators.back() == '\n') entry.final_operators.pop_back();
  }
  if (entry.id.empty()) return std::nullopt;
  if ((entry.state == "running" || entry.state == "restarting") && !process_alive(entry.coordinator_pid)) {
    entry.state = "failed";
    entry.lost = true;
  }
  return entry;
}

std::optional<JobEntry> read_job(const std::filesystem::path& dir, bool final_report) {
  std::optional<std::string> content = read_small_file(dir / "job.json");
  if (!content) return std::nullopt;
  return parse_job(dir, *content, final_report);
}

void sort_oldest_first(std::vector<JobEntry>& jobs) {
  std::sort(jobs.begin(), jobs.end(), [](const JobEntry& a, const JobEntry& b) {
    return a.started != b.started ? a.started < b.started : a.id < b.id;
  });
}

} // namespace

bool process_alive(long pid) {
  if (pid <= 0 || (::kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM)) return false;
  // /proc/PID/stat: "PID (COMM) STATE ..."; COMM may hold spaces and parentheses, so the state
  // is the first field after the last ')'.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true; // no /proc: kill(2) said it exists
  auto close = line.rfind(')');
  return close == std::string::npos || close + 2 >= line.size() || line[close + 2] != 'Z';
}

bool wait_for_exit(long pid, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (process_alive(pid)) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

std::vector<JobEntry> list_live_jobs(const std::filesystem::path& state_dir) {
  std::vector<JobEntry> jobs;
  std::error_code ec;
  for (const auto& dir : std::filesystem::directory_iterator(state_dir / "jobs", ec)) {
    std::optional<std::string> content = read_small_file(dir.path() / "job.json");
    // Conservative: the words anywhere (a warning may hold them) mean a full parse.
    if (!content || (content->find("running") == std::string::npos &&
                     content->find("restarting") == std::string::npos))
      continue;
    std::optional<JobEntry> job = parse_job(dir.path(), *content, false);
    if (job && (job->state == "running" || job->state == "restarting")) jobs.push_back(std::move(*job));
  }
  sort_oldest_first(jobs);
  return jobs;
}

std::vector<JobEntry> list_jobs(const std::filesystem::path& state_dir, bool final_reports) {
  std::vector<JobEntry> jobs;
  std::error_code ec;
  for (const auto& dir : std::filesystem::directory_iterator(state_dir / "jobs", ec))
    if (auto job = read_job(dir.path(), final_reports)) jobs.push_back(std::move(*job));
  sort_oldest_first(jobs);
  return jobs;
}

JobEntry find_job(const std::filesystem::path& state_dir, const std::string& job) {
  std::vector<JobEntry> jobs = list_jobs(state_dir);
  std::vector<JobEntry> named;
  for (auto& j : jobs) {
    if (j.id == job) return j;
    if (j.name == job) named.push_back(j);
  }
  // A name is what a person types: the job of that name that runs now, else the newest of
  // them (jobs are sorted oldest first). Only two running ones leave no obvious choice.
  std::vector<JobEntry> running;
  for (auto& j : named)
    if (j.state == "running" || j.state == "restarting") running.push_back(j);
  if (running.size() == 1) return running.front();
  if (running.empty() && !named.empty()) return named.back();
  if (named.empty())
    throw Error(ErrorKind::Usage, "no job '" + job + "' in " + (state_dir / "jobs").string() +
                                      " (streamctl list shows the jobs)");
  std::string ids;
  for (const auto& j : running) ids += "\n  " + j.id + " (" + j.state + ")";
  throw Error(ErrorKind::Usage, "several running jobs are named '" + job + "'; give an id:" + ids);
}

} // namespace streamctl::runtime
