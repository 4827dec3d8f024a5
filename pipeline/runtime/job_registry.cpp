#include "pipeline/runtime/job_registry.hpp"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <random>
#include <unistd.h>

#include "state/error.hpp"
#include "state/json_writer.hpp"

namespace streamctl::runtime {

namespace {

std::string utc_now(const char* format) {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, format, &tm);
  return buf;
}

using state::json_string;

} // namespace

JobRegistration::JobRegistration(const std::filesystem::path& state_dir, const pipeline::PipelineSpec& spec,
                                 const std::string& reuse_id)
    : name_(spec.name), started_(utc_now("%Y-%m-%dT%H:%M:%SZ")), pipeline_file_(spec.file.string()),
      base_dir_(std::filesystem::absolute(spec.base_dir).string()) {
  std::random_device random;
  char suffix[8];
  std::snprintf(suffix, sizeof suffix, "%04x", random() & 0xffff);
  id_ = reuse_id.empty() ? spec.name + "-" + utc_now("%Y%m%d-%H%M%S") + "-" + suffix : reuse_id;
  dir_ = state_dir / "jobs" / id_;
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec)
    throw Error(ErrorKind::Usage, "cannot create the job directory '" + dir_.string() + "': " + ec.message() +
                                      " (set --state-dir or STREAMCTL_STATE_DIR)");
  socket_dir_ = dir_ / "sock";
  if ((socket_dir_ / "task-99999.sock").string().size() > 100)
    socket_dir_ = std::filesystem::temp_directory_path() / ("streamctl-" + id_);
  std::filesystem::create_directories(socket_dir_, ec);
  if (ec) throw Error(ErrorKind::Usage, "cannot create '" + socket_dir_.string() + "': " + ec.message());
}

void JobRegistration::write_pipeline(const std::string& text, const std::vector<std::string>& overrides) const {
  std::ofstream out(dir_ / "pipeline.toml");
  out << text;
  std::ofstream list(dir_ / "overrides");
  for (const auto& o : overrides) list << o << '\0';
  if (!out || !list) throw Error(ErrorKind::Internal, "cannot write the pipeline into '" + dir_.string() + "'");
}

void JobRegistration::write_run_options(const std::vector<std::pair<std::string, std::string>>& options) const {
  std::ofstream out(dir_ / "run_options");
  for (const auto& [name, value] : options) out << name << "=" << value << "\n";
  if (!out) throw Error(ErrorKind::Internal, "cannot write the run options into '" + dir_.string() + "'");
}

void JobRegistration::update(const std::string& state, const std::map<std::string, int>& pids) {
  std::string json = "{\n  \"id\": " + json_string(id_) + ",\n  \"name\": " + json_string(name_) +
                     ",\n  \"state\": " + json_string(state) + ",\n  \"started\": " + json_string(started_) +
                     ",\n  \"updated\": " + json_string(utc_now("%Y-%m-%dT%H:%M:%SZ")) +
                     ",\n  \"coordinator_pid\": " + std::to_string(::getpid()) +
                     ",\n  \"control\": " + json_string(control_endpoint_) +
                     ",\n  \"last_checkpoint\": " + json_string(last_checkpoint_) +
                     ",\n  \"pipeline_file\": " + json_string(pipeline_file_) +
                     ",\n  \"base_dir\": " + json_string(base_dir_) + ",\n  \"tasks\": [";
  bool first = true;
  for (const auto& [label, pid] : pids) {
    json += first ? "\n" : ",\n";
    json += "    {\"task\": " + json_string(label) + ", \"host\": \"localhost\", \"pid\": " + std::to_string(pid) + "}";
    first = false;
  }
  json += "\n  ]\n}\n";
  auto temp = dir_ / "job.json.tmp";
  {
    std::ofstream out(temp);
    out << json;
  }
  std::filesystem::rename(temp, dir_ / "job.json");
}

void JobRegistration::remove_sockets() const {
  std::error_code ec;
  std::filesystem::remove_all(socket_dir_, ec);
}

} // namespace streamctl::runtime
