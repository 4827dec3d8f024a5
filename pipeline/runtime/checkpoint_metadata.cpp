#include "pipeline/runtime/checkpoint_metadata.hpp"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>

#include <toml++/toml.h>

#include "state/durable_file.hpp"

namespace streamctl::runtime {

namespace fs = std::filesystem;

namespace {

constexpr std::int64_t kMetadataVersion = 1;

// The N of "chk-N", if the name is one.
std::optional<std::uint64_t> checkpoint_number(const std::string& name) {
  if (name.rfind("chk-", 0) != 0 || name.size() == 4 || name.size() > 24) return std::nullopt;
  std::uint64_t n = 0;
  for (char c : name.substr(4)) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return n;
}

struct Completed {
  fs::path dir;
  std::int64_t created_at = 0;
  std::uint64_t id = 0;
};

std::vector<Completed> completed_under(const fs::path& root, bool with_savepoints) {
  std::vector<Completed> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    std::string name = entry.path().filename().string();
    bool checkpoint = checkpoint_number(name).has_value();
    bool savepoint = name.rfind("savepoint-", 0) == 0;
    if (!(checkpoint || (with_savepoints && savepoint))) continue;
    auto metadata = read_metadata(entry.path());
    if (!metadata) continue;
    out.push_back(Completed{entry.path(), metadata->created_at_ms, metadata->checkpoint_id});
  }
  std::sort(out.begin(), out.end(), [](const Completed& a, const Completed& b) {
    return std::tie(a.created_at, a.id) < std::tie(b.created_at, b.id);
  });
  return out;
}

// A task's optional `spool_files`: plain file names, as the janitor resolves them in the spool
// directory and never follows a path out of it.
Result<std::vector<std::string>> read_spool_files(const toml::node* node) {
  std::vector<std::string> out;
  if (node == nullptr) return out;
  const toml::array* list = node->as_array();
  if (list == nullptr) return fail("spool_files is not a list");
  for (const auto& item : *list) {
    auto name = item.value<std::string>();
    if (!name || name->empty() || name->find('/') != std::string::npos || name->find('\0') != std::string::npos ||
        (*name)[0] == '.')
      return fail("bad spool file name in spool_files");
    out.push_back(*name);
  }
  return out;
}

} // namespace

fs::path checkpoint_root(const pipeline::PipelineSpec& spec, const fs::path& state_dir) {
  fs::path base = state_dir / "checkpoints";
  if (auto dir = spec.root["checkpoint"]["dir"].value<std::string>()) {
    base = fs::path(*dir);
    if (base.is_relative()) base = spec.base_dir / base;
  }
  return base / spec.name;
}

std::string task_snapshot_file(int chain, int subtask) {
  return "chain-" + std::to_string(chain) + "-subtask-" + std::to_string(subtask) + ".snap";
}

Result<void> write_metadata(const fs::path& dir, const CheckpointMetadata& m) {
  toml::table root;
  root.insert("format", "streamctl-checkpoint");
  root.insert("version", kMetadataVersion);
  root.insert("kind", m.kind);
  root.insert("job_name", m.job_name);
  root.insert("job_id", m.job_id);
  root.insert("checkpoint_id", static_cast<std::int64_t>(m.checkpoint_id));
  root.insert("created_at", m.created_at_ms);
  root.insert("max_parallelism", static_cast<std::int64_t>(m.max_parallelism));
  toml::array tasks;
  for (const auto& t : m.tasks) {
    toml::array nodes;
    for (const auto& n : t.nodes) nodes.push_back(n);
    toml::table task;
    task.insert("file", t.file);
    task.insert("nodes", std::move(nodes));
    task.insert("subtask", static_cast<std::int64_t>(t.subtask));
    task.insert("parallelism", static_cast<std::int64_t>(t.parallelism));
    task.insert("bytes", static_cast<std::int64_t>(t.bytes));
    if (!t.spool_files.empty()) {
      toml::array spool;
      for (const auto& name : t.spool_files) spool.push_back(name);
      task.insert("spool_files", std::move(spool));
    }
    tasks.push_back(std::move(task));
  }
  root.insert("tasks", std::move(tasks));
  std::ostringstream text;
  text << "# streamctl checkpoint metadata: written last; its presence completes the checkpoint.\n"
       << root << "\n";
  return state::write_file_durably(dir / kMetadataFile, text.str());
}

fs::path checkpoint_dir_of(const fs::path& path) {
  return path.filename() == kMetadataFile ? path.parent_path() : path;
}

Result<CheckpointMetadata> read_metadata(const fs::path& path) {
  fs::path file = checkpoint_dir_of(path) / kMetadataFile;
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    std::error_code ec;
    if (fs::is_directory(checkpoint_dir_of(path), ec))
      return fail(file.string() + ": missing: not a completed checkpoint or savepoint");
    return fail(checkpoint_dir_of(path).string() + ": no such checkpoint or savepoint directory");
  }
  std::stringstream text;
  text << in.rdbuf();
  toml::table root;
  try {
    root = toml::parse(text.str(), file.string());
  } catch (const toml::parse_error& e) {
    return fail(file.string() + ": not valid metadata: " + std::string(e.description()));
  }
  auto bad = [&](const std::string& what) { return fail(file.string() + ": " + what); };
  if (root["format"].value_or(std::string()) != "streamctl-checkpoint")
    return bad("not a streamctl checkpoint metadata file");
  auto version = root["version"].value_or(std::int64_t{0});
  if (version != kMetadataVersion)
    return bad("metadata version " + std::to_string(version) + " is not one this streamctl reads (1)");
  CheckpointMetadata m;
  m.kind = root["kind"].value_or(std::string("checkpoint"));
  m.job_name = root["job_name"].value_or(std::string());
  m.job_id = root["job_id"].value_or(std::string());
  auto id = root["checkpoint_id"].value<std::int64_t>();
  auto max_p = root["max_parallelism"].value<std::int64_t>();
  if (!id || *id < 0) return bad("missing or bad checkpoint_id");
  if (!max_p || *max_p < 1 || *max_p > 32768) return bad("missing or bad max_parallelism");
  m.checkpoint_id = static_cast<std::uint64_t>(*id);
  m.max_parallelism = static_cast<int>(*max_p);
  m.created_at_ms = root["created_at"].value_or(std::int64_t{0});
  const toml::array* tasks = root["tasks"].as_array();
  if (!tasks) return bad("no tasks");
  for (const auto& item : *tasks) {
    const toml::table* t = item.as_table();
    if (!t) return bad("a task entry is not a table");
    CheckpointTaskFile f;
    f.file = (*t)["file"].value_or(std::string());
    // Names only: a savepoint is a self-contained directory, and a path elsewhere is not read.
    if (f.file.empty() || f.file.find('/') != std::string::npos || f.file[0] == '.')
      return bad("bad task file name '" + f.file + "'");
    f.subtask = static_cast<int>((*t)["subtask"].value_or(std::int64_t{-1}));
    f.parallelism = static_cast<int>((*t)["parallelism"].value_or(std::int64_t{0}));
    f.bytes = static_cast<std::uint64_t>((*t)["bytes"].value_or(std::int64_t{0}));
    if (f.parallelism < 1 || f.subtask < 0 || f.subtask >= f.parallelism)
      return bad("task '" + f.file + "': bad subtask/parallelism");
    if (const toml::array* nodes = (*t)["nodes"].as_array())
      for (const auto& n : *nodes)
        if (auto s = n.value<std::string>()) f.nodes.push_back(*s);
    if (f.nodes.empty()) return bad("task '" + f.file + "': no nodes");
    if (auto spool = read_spool_files((*t)["spool_files"].node()); !spool)
      return bad("task '" + f.file + "': " + spool.error());
    else
      f.spool_files = std::move(*spool);
    m.tasks.push_back(std::move(f));
  }
  return m;
}

std::vector<fs::path> completed_checkpoints(const fs::path& root) {
  std::vector<fs::path> out;
  for (auto& c : completed_under(root, false)) out.push_back(std::move(c.dir));
  return out;
}

std::optional<fs::path> latest_restorable(const fs::path& root) {
  auto all = completed_under(root, true);
  if (all.empty()) return std::nullopt;
  std::int64_t drained = 0;
  if (std::ifstream in(root / "drained"); in) in >> drained;
  if (all.back().created_at <= drained) return std::nullopt;
  return all.back().dir;
}

Result<void> mark_drained(const fs::path& root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return {};
  auto now = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch());
  return state::write_file_durably(root / "drained", std::to_string(now.count()) + "\n");
}

std::uint64_t next_checkpoint_id(const fs::path& root) {
  std::uint64_t next = 1;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    std::string name = entry.path().filename().string();
    if (auto n = checkpoint_number(name)) next = std::max(next, *n + 1);
    else if (name.rfind("savepoint-", 0) == 0)
      if (auto m = read_metadata(entry.path())) next = std::max(next, m->checkpoint_id + 1);
  }
  return next;
}

std::vector<std::string> prune_checkpoints(const fs::path& root, int retain) {
  std::vector<std::string> problems;
  auto completed = completed_under(root, false);
  if (completed.empty()) return problems;
  std::uint64_t newest = completed.back().id;
  std::vector<fs::path> doomed;
  if (completed.size() > static_cast<std::size_t>(std::max(retain, 1)))
    for (std::size_t k = 0; k + static_cast<std::size_t>(std::max(retain, 1)) < completed.size(); ++k)
      doomed.push_back(completed[k].dir);
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    auto n = checkpoint_number(entry.path().filename().string());
    if (n && *n < newest && !fs::exists(entry.path() / kMetadataFile)) doomed.push_back(entry.path());
  }
  for (const auto& dir : doomed) {
    std::error_code rm;
    // The metadata goes first: a half-deleted checkpoint must never look complete.
    fs::remove(dir / kMetadataFile, rm);
    fs::remove_all(dir, rm);
    if (rm) problems.push_back("cannot delete old checkpoint " + dir.string() + ": " + rm.message());
  }
  return problems;
}

} // namespace streamctl::runtime
