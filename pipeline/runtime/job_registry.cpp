#include "pipeline/runtime/job_registry.hpp"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <string_view>
#include <cstdlib>
#include <unistd.h>

#include "pipeline/runtime/utc_clock.hpp"
#include "state/error.hpp"
#include "state/json_writer.hpp"

namespace streamctl::runtime {

namespace {


using state::json_string;

// The longest name put into the socket directory: task-ID-ATTEMPT.sock (worker.cpp), with
// ID and ATTEMPT as large as they get.
constexpr std::string_view kLongestSocketName = "task-4294967295-4294967295.sock";
// sun_path of a Unix socket holds 107 bytes and a NUL.
constexpr std::size_t kMaxSocketPath = 107;

bool fits_socket_names(const std::filesystem::path& dir) {
  return dir.string().size() + 1 + kLongestSocketName.size() <= kMaxSocketPath;
}

// A new private directory "streamctl-XXXXXX" under `parent` (mkdtemp: mode 0700, a name no
// one could have planted), or nullopt.
std::optional<std::filesystem::path> make_temp_dir(const std::filesystem::path& parent) {
  std::string pattern = (parent / "streamctl-XXXXXX").string();
  if (!fits_socket_names(pattern) || ::mkdtemp(pattern.data()) == nullptr) return std::nullopt;
  return std::filesystem::path(pattern);
}

} // namespace

JobRegistration::JobRegistration(const std::filesystem::path& state_dir, const pipeline::PipelineSpec& spec,
                                 const std::string& reuse_id)
    : name_(spec.name), started_(utc_now()), pipeline_file_(spec.file.string()),
      base_dir_(std::filesystem::absolute(spec.base_dir).string()) {
  std::error_code ec;
  if (reuse_id.empty()) {
    // A new id: its directory made here and now, never one that another job has (two jobs of
    // one name started in the same second draw their 16-bit suffixes until one is free).
    std::random_device random;
    dir_ = state_dir / "jobs"; // what an error names when none can be made
    std::filesystem::create_directories(dir_, ec);
    for (int attempt = 0; !ec && attempt < 64 && !created_dir_; ++attempt) {
      char suffix[8];
      std::snprintf(suffix, sizeof suffix, "%04x", random() & 0xffff);
      id_ = spec.name + "-" + utc_now(kCompactUtc) + "-" + suffix;
      dir_ = state_dir / "jobs" / id_;
      created_dir_ = std::filesystem::create_directory(dir_, ec);
    }
    if (!ec && !created_dir_) ec = std::make_error_code(std::errc::file_exists);
  } else {
    id_ = reuse_id;
    dir_ = state_dir / "jobs" / id_;
    std::filesystem::create_directories(dir_, ec);
  }
  if (ec)
    throw Error(ErrorKind::Usage, "cannot create the job directory '" + dir_.string() + "': " + ec.message() +
                                      " (set --state-dir or STREAMCTL_STATE_DIR)");
  try {
    make_socket_dir();
  } catch (...) {
    discard_unpublished();
    throw;
  }
}

JobRegistration::~JobRegistration() {
  remove_sockets();
  discard_unpublished();
}

void JobRegistration::make_socket_dir() {
  // The socket names must fit a Unix socket's 107 bytes whatever the job's name and the state
  // dir's depth: inside the job directory when they fit, else a short private directory.
  socket_dir_ = dir_ / "sock";
  std::error_code ec;
  if (fits_socket_names(socket_dir_)) {
    std::filesystem::create_directories(socket_dir_, ec);
    if (ec) throw Error(ErrorKind::Usage, "cannot create '" + socket_dir_.string() + "': " + ec.message());
    return;
  }
  std::vector<std::filesystem::path> parents;
  if (auto tmp = std::filesystem::temp_directory_path(ec); !ec) parents.push_back(tmp);
  parents.emplace_back("/tmp");
  for (const auto& parent : parents)
    if (auto made = make_temp_dir(parent)) {
      socket_dir_ = *made;
      return;
    }
  socket_dir_.clear();
  throw Error(ErrorKind::Usage, "no directory for the job's Unix sockets: '" + (dir_ / "sock").string() +
                                    "' and a directory under $TMPDIR or /tmp are too long for a socket path "
                                    "or cannot be created (set TMPDIR to a short writable directory)");
}

void JobRegistration::discard_unpublished() {
  if (!created_dir_ || published_) return;
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
  created_dir_ = false;
}

void JobRegistration::write_pipeline(const std::string& text, const std::vector<std::string>& overrides,
                                     const std::map<std::string, std::string>& variables) const {
  std::ofstream out(dir_ / "pipeline.toml");
  out << text;
  std::ofstream list(dir_ / "overrides");
  for (const auto& o : overrides) list << o << '\0';
  // Environment values may be credentials: readable by the job's owner alone.
  std::ofstream vars(dir_ / "variables");
  std::error_code ec;
  std::filesystem::permissions(dir_ / "variables",
                               std::filesystem::perms::owner_read | std::filesystem::perms::owner_write, ec);
  for (const auto& [name, value] : variables) vars << name << '=' << value << '\0';
  out.flush();
  list.flush();
  vars.flush();
  if (!out || !list || !vars) throw Error(ErrorKind::Internal, "cannot write the pipeline into '" + dir_.string() + "'");
}

StoredPipeline read_stored_pipeline(const std::filesystem::path& job_dir) {
  StoredPipeline stored;
  std::ifstream in(job_dir / "pipeline.toml");
  if (!in) return stored;
  stored.found = true;
  std::stringstream text;
  text << in.rdbuf();
  stored.text = text.str();
  std::ifstream list(job_dir / "overrides");
  for (std::string o; std::getline(list, o, '\0');) stored.overrides.push_back(o);
  std::ifstream vars(job_dir / "variables");
  for (std::string v; std::getline(vars, v, '\0');) {
    auto eq = v.find('=');
    if (eq != std::string::npos) stored.variables[v.substr(0, eq)] = v.substr(eq + 1);
  }
  return stored;
}

void JobRegistration::write_run_options(const std::vector<std::pair<std::string, std::string>>& options) const {
  std::ofstream out(dir_ / "run_options");
  for (const auto& [name, value] : options) out << name << "=" << value << "\n";
  if (!out) throw Error(ErrorKind::Internal, "cannot write the run options into '" + dir_.string() + "'");
}

void JobRegistration::update(const std::string& state, const std::map<std::string, int>& pids) {
  std::string json = "{\n  \"id\": " + json_string(id_) + ",\n  \"name\": " + json_string(name_) +
                     ",\n  \"state\": " + json_string(state) + ",\n  \"started\": " + json_string(started_) +
                     ",\n  \"updated\": " + json_string(utc_now()) +
                     ",\n  \"coordinator_pid\": " + std::to_string(::getpid()) +
                     ",\n  \"control\": " + json_string(control_endpoint_) +
                     ",\n  \"last_checkpoint\": " + json_string(last_checkpoint_) +
                     ",\n  \"pipeline_file\": " + json_string(pipeline_file_) +
                     ",\n  \"base_dir\": " + json_string(base_dir_);
  if (failure_)
    json += ",\n  \"failure\": {\"node\": " + json_string(failure_->node) + ", \"task\": " +
            json_string(failure_->task) + ", \"message\": " + json_string(failure_->message) +
            ", \"time\": " + json_string(failure_->time) + "}";
  if (!warnings_.empty()) {
    json += ",\n  \"warnings\": [";
    for (std::size_t k = 0; k < warnings_.size(); ++k) json += (k ? ", " : "") + json_string(warnings_[k]);
    json += "]";
  }
  json += ",\n  \"tasks\": [";
  bool first = true;
  for (const auto& [label, pid] : pids) {
    json += first ? "\n" : ",\n";
    // A worker that has exited has no pid: its number may be another process's by now.
    json += "    {\"task\": " + json_string(label) + ", \"host\": \"localhost\", \"pid\": " +
            (pid > 0 ? std::to_string(pid) : std::string("null")) + "}";
    first = false;
  }
  json += "\n  ]\n}\n";
  auto temp = dir_ / "job.json.tmp";
  {
    std::ofstream out(temp);
    out << json;
  }
  if (!final_operators_.empty()) {
    auto operators_temp = dir_ / "operators.json.tmp";
    {
      std::ofstream out(operators_temp);
      out << final_operators_ << "\n";
    }
    std::filesystem::rename(operators_temp, dir_ / "operators.json");
  }
  std::filesystem::rename(temp, dir_ / "job.json");
  published_ = true;
}

void JobRegistration::remove_sockets() const {
  if (socket_dir_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(socket_dir_, ec);
}

} // namespace streamctl::runtime
