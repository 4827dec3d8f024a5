#include "pipeline/runtime/sample_run.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "state/error.hpp"

namespace streamctl::runtime {

namespace {

namespace fs = std::filesystem;

// A TOML basic string: overrides parse their value as TOML first.
std::string toml_string(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

const char* group_of(pipeline::NodeRole role) {
  switch (role) {
  case pipeline::NodeRole::Source: return "sources";
  case pipeline::NodeRole::Operator: return "operators";
  case pipeline::NodeRole::Sink: return "sinks";
  }
  return "";
}

std::string key_of(const pipeline::NodeSpec& node, const char* key) {
  return std::string(group_of(node.role)) + "." + toml_string(node.name) + "." + key;
}

// A readable regular file (or a pipe or device: anything but a directory), checked by opening it.
void check_readable(const fs::path& sample) {
  int fd = ::open(sample.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw Error(ErrorKind::Usage,
                "cannot read the sample file '" + sample.string() + "': " + std::strerror(errno));
  ::close(fd);
  std::error_code ec;
  if (fs::is_directory(sample, ec))
    throw Error(ErrorKind::Usage,
                "cannot read the sample file '" + sample.string() + "': it is a directory");
}

// Refused before anything starts: the sample replaces a file source's path, and the other
// sources read an empty file instead of theirs.
void check_sources(const pipeline::PipelineSpec& spec) {
  for (const auto& node : spec.nodes) {
    if (node.role != pipeline::NodeRole::Source || node.type == "file") continue;
    throw Error(ErrorKind::Usage,
                pipeline::position_of(spec, node, "type") + ": source '" + node.name +
                    "' is of type '" + node.type +
                    "', which has no path to replace: --sample supports pipelines whose sources "
                    "are of type 'file' (the first reads the sample, the others nothing)");
  }
}

// The overrides that turn the job into its sample run (sample_run.hpp).
std::vector<std::string> sample_overrides(const LoadedJob& job, const fs::path& sample,
                                          const fs::path& dir) {
  std::vector<std::string> out = job.overrides;
  out.push_back("parallelism=1");
  // Whole records everywhere: "did you mean" suggests from the fields that records had, and
  // projection would keep only those that something reads.
  out.push_back("projection=false");
  if (job.spec.root.contains("checkpoint")) out.push_back("checkpoint.interval=0");
  bool first_source = true;
  for (const auto& node : job.spec.nodes) {
    // A sink that reaches outside the job (tcp, zmq, exec) becomes a file sink as a whole: its
    // own keys (an address, a command) mean nothing to one, and overrides cannot remove keys.
    // stdout keeps its table, whose keys a file sink takes, so that warnings point into it.
    const bool replaced =
        node.role == pipeline::NodeRole::Sink && node.type != "file" && node.type != "stdout";
    if (replaced) {
      std::ostringstream table;
      table << group_of(node.role) << "." << toml_string(node.name)
            << "={type=\"file\",path=" << toml_string((dir / "out" / node.name).string());
      if (const auto* inputs = node.config["inputs"].as_array()) table << ",inputs=" << *inputs;
      if (auto on_error = node.config["on_error"].value<std::string>())
        table << ",on_error=" << toml_string(*on_error);
      table << "}";
      out.push_back(table.str());
    }
    if (node.parallelism > 0 && !replaced) out.push_back(key_of(node, "parallelism") + "=1");
    if (node.config.contains("dead_letter"))
      out.push_back(key_of(node, "dead_letter") + "=" +
                    toml_string((dir / (node.name + ".dead_letter.jsonl")).string()));
    if (node.role == pipeline::NodeRole::Source) {
      out.push_back(key_of(node, "path") + "=" +
                    toml_string(first_source ? sample.string() : (dir / "empty").string()));
      first_source = false;
    } else if (node.role == pipeline::NodeRole::Sink && !replaced) {
      if (node.type != "file") out.push_back(key_of(node, "type") + "=\"file\"");
      out.push_back(key_of(node, "path") + "=" + toml_string((dir / "out" / node.name).string()));
    }
  }
  return out;
}

// The run's scratch directory, removed on every way out.
struct ScratchDir {
  fs::path path;
  ~ScratchDir() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
};

} // namespace

RunOutcome run_sample(const LoadedJob& job, const fs::path& sample,
                      const operators::Registry& registry, const RunOptions& options,
                      spdlog::logger& log) {
  check_sources(job.spec);
  check_readable(sample);
  fs::path base = options.state_dir / "samples";
  fs::create_directories(base);
  std::string tmpl = (base / (job.spec.name + "-XXXXXX")).string();
  if (::mkdtemp(tmpl.data()) == nullptr)
    throw Error(ErrorKind::Internal,
                "cannot create a directory under " + base.string() + ": " + std::strerror(errno));
  ScratchDir dir{tmpl};
  std::ofstream(dir.path / "empty").flush();
  // From the text `validate` read, under the same name: warnings point into the user's file.
  LoadedJob sample_job =
      load_job_text(job.text, job.spec.file.string(), job.spec.base_dir,
                    sample_overrides(job, fs::absolute(sample), dir.path), registry, job.variables);
  RunOptions local = options;
  local.ignore_cluster = true;
  return run_job(sample_job, local, log);
}

} // namespace streamctl::runtime
