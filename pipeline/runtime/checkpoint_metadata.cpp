#include "pipeline/runtime/checkpoint_metadata.hpp"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <limits>
#include <set>
#include <sstream>

#include <toml++/toml.h>

#include "pipeline/runtime/checkpoint_completeness.hpp"
#include "pipeline/runtime/metadata_checksum.hpp"
#include "state/durable_file.hpp"

namespace streamctl::runtime {

namespace fs = std::filesystem;

namespace {

// Version 2 added `chains` and the checksum line; version 3, a task's `previous` files
// (incremental checkpoints), written only when there are some. Versions 1 and 2 are still read.
constexpr std::int64_t kMetadataVersion = 2;
constexpr std::int64_t kIncrementalMetadataVersion = 3;
// A chain of deltas longer than this is not one streamctl wrote (full_every is at most 1000).
constexpr std::size_t kMaxPreviousFiles = 1000;
constexpr std::int64_t kMaxParallelismLimit = 32768;
// More chains than this in one _metadata is not a plan streamctl made.
constexpr std::int64_t kMaxChains = 1 << 20;

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

// The N of "savepoint-...-N" (the id the coordinator puts in the names it chooses), if any.
std::optional<std::uint64_t> savepoint_number(const std::string& name) {
  if (name.rfind("savepoint-", 0) != 0) return std::nullopt;
  auto dash = name.rfind('-');
  return checkpoint_number("chk-" + name.substr(dash + 1));
}

struct Completed {
  fs::path dir;
  std::int64_t created_at = 0;
  std::uint64_t id = 0;
  std::vector<fs::path> previous; // files of earlier checkpoints it needs (lexically normal)
};

// A chk-N or savepoint-... directory whose _metadata exists but cannot be read.
struct Damaged {
  fs::path dir;
  std::optional<std::uint64_t> id; // from its name
  std::int64_t written_ms = 0;      // when its _metadata was last written (mtime)
  std::string error;
};

std::int64_t mtime_ms(const fs::path& file) {
  std::error_code ec;
  auto t = fs::last_write_time(file, ec);
  if (ec) return std::numeric_limits<std::int64_t>::max();
  auto system = std::chrono::file_clock::to_sys(t);
  return std::chrono::duration_cast<std::chrono::milliseconds>(system.time_since_epoch()).count();
}

// What `drained` records: "checkpoint N at MS" (every snapshot with an id up to N was there
// when a run drained, at epoch ms MS), or MS alone (streamctl before 2026-12: by time only).
struct Drained {
  std::optional<std::uint64_t> last_id;
  std::int64_t at_ms = 0;

  bool covers(std::optional<std::uint64_t> id, std::int64_t written_ms) const {
    if (last_id && id) return *id <= *last_id;
    return written_ms <= at_ms;
  }
};

// A `drained` that cannot be read is refused: taken as absent, a resume would publish again
// what the drained run published; taken as covering everything, it would start over.
Result<Drained> read_drained(const fs::path& root) {
  Drained out;
  std::error_code ec;
  if (!fs::exists(root / "drained", ec)) return out;
  std::ifstream in(root / "drained");
  std::string word, at;
  std::uint64_t id = 0;
  bool good = false;
  if (in >> word) {
    if (word == "checkpoint") {
      good = static_cast<bool>(in >> id >> at >> out.at_ms) && at == "at";
      out.last_id = id;
    } else {
      char* end = nullptr;
      out.at_ms = std::strtoll(word.c_str(), &end, 10);
      good = end && *end == '\0';
    }
  }
  if (!good)
    return fail((root / "drained").string() + " is damaged (it records which snapshots a run that drained its input "
                "left behind, as \"checkpoint N at EPOCH_MS\"): fix it, or delete it to resume from the newest "
                "snapshot, or run without --resume");
  return out;
}

// Calls `note` with the id of each chk-N (by its name) and savepoint (by its metadata, or its
// name when that cannot be read) directly under `root`, but the directory `except` (empty: none).
void for_each_snapshot_id(const fs::path& root, const fs::path& except,
                          const std::function<void(std::uint64_t)>& note) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    std::error_code same;
    if (!except.empty() && fs::equivalent(entry.path(), except, same)) continue;
    std::string name = entry.path().filename().string();
    if (auto n = checkpoint_number(name)) {
      note(*n);
    } else if (name.rfind("savepoint-", 0) == 0) {
      if (auto m = read_metadata(entry.path())) note(m->checkpoint_id);
      else if (auto s = savepoint_number(name)) note(*s);
    }
  }
}

// What `restored` records (mark_restored).
struct Restored {
  fs::path snapshot;
  std::uint64_t id = 0;          // the snapshot's checkpoint id
  std::uint64_t superseding = 0; // snapshots under root with an id up to this are older
};

// nullopt when there is none; a `restored` that cannot be read is refused, as a `drained` is:
// ignored, a resume could go back to a snapshot older than what the last run published.
Result<std::optional<Restored>> read_restored(const fs::path& root) {
  std::error_code ec;
  if (!fs::exists(root / "restored", ec)) return std::optional<Restored>{};
  const auto damaged = [&] {
    return fail((root / "restored").string() + " is damaged (it records the snapshot the job's last run started "
                "from, as restored = \"PATH\", restored_id = ID, superseding = N): fix it, or choose a snapshot "
                "with --from-savepoint");
  };
  toml::table t;
  try {
    t = toml::parse_file((root / "restored").string());
  } catch (const toml::parse_error&) {
    return damaged();
  }
  auto path = t["restored"].value<std::string>();
  auto id = t["restored_id"].value<std::int64_t>();
  auto superseding = t["superseding"].value<std::int64_t>();
  if (!path || path->empty() || !id || *id < 0 || !superseding || *superseding < 0) return damaged();
  return std::optional<Restored>{Restored{*path, static_cast<std::uint64_t>(*id), static_cast<std::uint64_t>(*superseding)}};
}

struct Listing {
  std::vector<Completed> completed; // oldest first
  std::vector<Damaged> damaged;
};

Listing list_under(const fs::path& root, bool with_savepoints) {
  Listing out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    std::string name = entry.path().filename().string();
    auto number = checkpoint_number(name);
    bool savepoint = name.rfind("savepoint-", 0) == 0;
    if (!(number || (with_savepoints && savepoint))) continue;
    auto metadata = read_metadata(entry.path());
    if (metadata) {
      Completed c{entry.path(), metadata->created_at_ms, metadata->checkpoint_id, {}};
      for (const auto& task : metadata->tasks)
        for (const auto& p : task.previous) c.previous.push_back((entry.path() / p.path).lexically_normal());
      out.completed.push_back(std::move(c));
    } else {
      std::error_code exists;
      if (fs::exists(entry.path() / kMetadataFile, exists))
        out.damaged.push_back(Damaged{entry.path(), number ? number : savepoint_number(name),
                                      mtime_ms(entry.path() / kMetadataFile), metadata.error()});
    }
  }
  // By id, which the coordinators of a job's runs take in turn from next_checkpoint_id: the
  // system clock of created_at may step back (NTP, a VM restored), and ordering by it could
  // restore, or prune, the wrong checkpoint.
  std::sort(out.completed.begin(), out.completed.end(), [](const Completed& a, const Completed& b) {
    return std::tie(a.id, a.created_at) < std::tie(b.id, b.created_at);
  });
  return out;
}

std::vector<Completed> completed_under(const fs::path& root, bool with_savepoints) {
  return list_under(root, with_savepoints).completed;
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

// A task's optional `previous` and `previous_bytes` (version 3): "../chk-N/" and a task file
// name each, N below `checkpoint_id` and rising; never a path that leaves the job's root.
Result<std::vector<CheckpointTaskFile::PreviousFile>> read_previous(const toml::table& task, std::int64_t version,
                                                                   std::uint64_t checkpoint_id) {
  std::vector<CheckpointTaskFile::PreviousFile> out;
  const toml::node* paths = task.get("previous");
  const toml::node* sizes = task.get("previous_bytes");
  if (paths == nullptr && sizes == nullptr) return out;
  if (version < kIncrementalMetadataVersion) return fail("previous files in metadata of version " + std::to_string(version));
  const toml::array* list = paths ? paths->as_array() : nullptr;
  const toml::array* bytes = sizes ? sizes->as_array() : nullptr;
  if (list == nullptr || bytes == nullptr || list->size() != bytes->size() || list->size() > kMaxPreviousFiles)
    return fail("previous and previous_bytes are not two lists of the same length");
  std::uint64_t last = 0;
  for (std::size_t k = 0; k < list->size(); ++k) {
    auto path = (*list)[k].value_exact<std::string>();
    auto size = (*bytes)[k].value_exact<std::int64_t>();
    if (!path) return fail("a previous file that is not a string");
    auto n = previous_checkpoint_of(*path);
    if (!n) return fail("previous file '" + *path + "' is not ../chk-N/chain-C-subtask-S.snap");
    if (*n >= checkpoint_id || (k > 0 && *n <= last))
      return fail("previous file '" + *path + "' is not of an earlier checkpoint than the one before it");
    if (!size || *size < 0) return fail("bad previous_bytes for '" + *path + "'");
    last = *n;
    out.push_back({*path, static_cast<std::uint64_t>(*size)});
  }
  return out;
}

} // namespace

std::optional<std::uint64_t> previous_checkpoint_of(std::string_view path) {
  if (path.substr(0, 3) != "../") return std::nullopt;
  path.remove_prefix(3);
  auto slash = path.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  auto n = checkpoint_number(std::string(path.substr(0, slash)));
  if (!n || !is_task_snapshot_file(path.substr(slash + 1))) return std::nullopt;
  return n;
}

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

bool is_task_snapshot_file(std::string_view name) {
  // Digits, then `literal`, consumed from the front of `name`.
  auto number_then = [&name](std::string_view literal) {
    std::size_t digits = 0;
    while (digits < name.size() && digits < 10 && name[digits] >= '0' && name[digits] <= '9') ++digits;
    if (digits == 0 || name.substr(digits, literal.size()) != literal) return false;
    name.remove_prefix(digits + literal.size());
    return true;
  };
  if (name.substr(0, 6) != "chain-") return false;
  name.remove_prefix(6);
  return number_then("-subtask-") && number_then(".snap") && name.empty();
}

Result<void> write_metadata(const fs::path& dir, const CheckpointMetadata& m) {
  toml::table root;
  root.insert("format", "streamctl-checkpoint");
  const bool incremental = std::any_of(m.tasks.begin(), m.tasks.end(), [](const auto& t) { return !t.previous.empty(); });
  root.insert("version", incremental ? kIncrementalMetadataVersion : kMetadataVersion);
  root.insert("kind", m.kind);
  root.insert("job_name", m.job_name);
  root.insert("job_id", m.job_id);
  root.insert("checkpoint_id", static_cast<std::int64_t>(m.checkpoint_id));
  root.insert("created_at", m.created_at_ms);
  root.insert("max_parallelism", static_cast<std::int64_t>(m.max_parallelism));
  std::set<std::vector<std::string>> chains;
  for (const auto& t : m.tasks) chains.insert(t.nodes);
  root.insert("chains", static_cast<std::int64_t>(chains.size()));
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
    if (!t.counts.empty()) task.insert("counts", t.counts);
    if (!t.previous.empty()) {
      toml::array paths, sizes;
      for (const auto& p : t.previous) {
        paths.push_back(p.path);
        sizes.push_back(static_cast<std::int64_t>(p.bytes));
      }
      task.insert("previous", std::move(paths));
      task.insert("previous_bytes", std::move(sizes));
    }
    tasks.push_back(std::move(task));
  }
  root.insert("tasks", std::move(tasks));
  std::ostringstream text;
  text << "# streamctl checkpoint metadata: written last; its presence completes the checkpoint.\n"
       << root << "\n";
  return state::write_file_durably(dir / kMetadataFile, append_checksum_line(text.str()));
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
  std::string bytes = text.str();
  auto checked = split_checksum_line(bytes, file.string());
  if (!checked) return Failure{checked.error()};
  toml::table root;
  try {
    root = toml::parse(checked->body, file.string());
  } catch (const toml::parse_error& e) {
    return fail(file.string() + ": not valid metadata: " + std::string(e.description()));
  }
  auto bad = [&](const std::string& what) { return fail(file.string() + ": " + what); };
  if (root["format"].value_or(std::string()) != "streamctl-checkpoint")
    return bad("not a streamctl checkpoint metadata file");
  auto version = root["version"].value_exact<std::int64_t>();
  if (!version || *version < 1 || *version > kIncrementalMetadataVersion)
    return bad("metadata version " + (version ? std::to_string(*version) : std::string("(missing)")) +
               " is not one this streamctl reads (1, 2 or 3)");
  if (*version >= 2 && !checked->has_checksum)
    return bad("no checksum line at its end (metadata version 2 always has one): it is damaged or was edited");
  CheckpointMetadata m;
  m.version = *version;
  auto kind = root["kind"].value_exact<std::string>();
  if (!kind || (*kind != "checkpoint" && *kind != "savepoint"))
    return bad("kind is " + (kind ? "'" + *kind + "'" : std::string("missing or not a string")) +
               ", not 'checkpoint' or 'savepoint'");
  m.kind = *kind;
  auto job_name = root["job_name"].value_exact<std::string>();
  auto job_id = root["job_id"].value_exact<std::string>();
  if (!job_name || !job_id) return bad("job_name or job_id missing or not a string");
  m.job_name = *job_name;
  m.job_id = *job_id;
  auto id = root["checkpoint_id"].value_exact<std::int64_t>();
  auto max_p = root["max_parallelism"].value_exact<std::int64_t>();
  auto created_at = root["created_at"].value_exact<std::int64_t>();
  if (!id || *id < 0) return bad("missing or bad checkpoint_id");
  if (!max_p || *max_p < 1 || *max_p > kMaxParallelismLimit) return bad("missing or bad max_parallelism");
  if (!created_at) return bad("missing or bad created_at");
  m.checkpoint_id = static_cast<std::uint64_t>(*id);
  m.max_parallelism = static_cast<int>(*max_p);
  m.created_at_ms = *created_at;
  if (*version >= 2) {
    auto chains = root["chains"].value_exact<std::int64_t>();
    if (!chains || *chains < 1 || *chains > kMaxChains) return bad("missing or bad chains");
    m.chains = static_cast<int>(*chains);
  }
  const toml::array* tasks = root["tasks"].as_array();
  if (!tasks || tasks->empty()) return bad("no tasks");
  for (const auto& item : *tasks) {
    const toml::table* t = item.as_table();
    if (!t) return bad("a task entry is not a table");
    CheckpointTaskFile f;
    f.file = (*t)["file"].value_exact<std::string>().value_or(std::string());
    // Names only: a savepoint is a self-contained directory, and a path elsewhere is not read.
    if (f.file.empty() || f.file.find('/') != std::string::npos || f.file.find('\0') != std::string::npos ||
        f.file[0] == '.')
      return bad("bad task file name '" + f.file + "'");
    auto task_bad = [&](const std::string& what) { return bad("task '" + f.file + "': " + what); };
    // 64-bit and range-checked before narrowing: subtask = 4294967296 is not subtask 0.
    auto subtask = (*t)["subtask"].value_exact<std::int64_t>();
    auto parallelism = (*t)["parallelism"].value_exact<std::int64_t>();
    auto size = (*t)["bytes"].value_exact<std::int64_t>();
    if (!parallelism || *parallelism < 1 || *parallelism > *max_p)
      return task_bad("parallelism " + (parallelism ? std::to_string(*parallelism) : std::string("(missing or not an integer)")) +
                      " is not within 1..max_parallelism (" + std::to_string(*max_p) + ")");
    if (!subtask || *subtask < 0 || *subtask >= *parallelism)
      return task_bad("subtask " + (subtask ? std::to_string(*subtask) : std::string("(missing or not an integer)")) +
                      " is not within 0.." + std::to_string(*parallelism - 1) + " (bad subtask/parallelism)");
    if (!size || *size < 0) return task_bad("missing or bad bytes");
    f.subtask = static_cast<int>(*subtask);
    f.parallelism = static_cast<int>(*parallelism);
    f.bytes = static_cast<std::uint64_t>(*size);
    const toml::array* nodes = (*t)["nodes"].as_array();
    if (!nodes) return task_bad("no nodes");
    for (const auto& n : *nodes) {
      auto name = n.value_exact<std::string>();
      if (!name || name->empty()) return task_bad("a node name that is not a non-empty string");
      f.nodes.push_back(*name);
    }
    if (f.nodes.empty()) return task_bad("no nodes");
    if (auto spool = read_spool_files((*t)["spool_files"].node()); !spool)
      return task_bad(spool.error());
    else
      f.spool_files = std::move(*spool);
    if (auto previous = read_previous(*t, *version, m.checkpoint_id); !previous)
      return task_bad(previous.error());
    else
      f.previous = std::move(*previous);
    if (!f.previous.empty() && m.kind != "checkpoint") return task_bad("a savepoint with previous files");
    // Informative only (job_metrics.hpp): a damaged value is dropped, never a reason to refuse.
    f.counts = (*t)["counts"].value_or(std::string());
    m.tasks.push_back(std::move(f));
  }
  if (auto complete = check_chains_complete(m, file.string()); !complete) return Failure{complete.error()};
  return m;
}

std::vector<fs::path> completed_checkpoints(const fs::path& root) {
  std::vector<fs::path> out;
  for (auto& c : completed_under(root, false)) out.push_back(std::move(c.dir));
  return out;
}

Result<std::optional<fs::path>> latest_restorable(const fs::path& root) {
  Listing all = list_under(root, true);
  auto restored_or = read_restored(root);
  if (!restored_or) return Failure{restored_or.error()};
  const std::optional<Restored>& restored = *restored_or;
  if (restored) { // what the last run superseded is not resumed from, damaged or not
    std::erase_if(all.completed, [&](const Completed& c) { return c.id <= restored->superseding; });
    std::erase_if(all.damaged, [&](const Damaged& d) { return d.id && *d.id <= restored->superseding; });
  }
  std::optional<Completed> latest;
  if (!all.completed.empty()) latest = all.completed.back();
  auto drained_or = read_drained(root);
  if (!drained_or) return Failure{drained_or.error()};
  const Drained& drained = *drained_or;
  if (restored && !latest && all.damaged.empty() && !drained.covers(restored->id, mtime_ms(root / "restored"))) {
    std::error_code ec;
    if (!fs::exists(restored->snapshot / kMetadataFile, ec))
      return fail("the job's last run started from " + restored->snapshot.string() + " (snapshot " +
                  std::to_string(restored->id) + "), which is gone or incomplete, and " + root.string() +
                  " holds nothing newer: resuming from an older snapshot would publish output again; restore "
                  "a copy of it with --from-savepoint, or run without --resume");
    return std::optional<fs::path>{restored->snapshot};
  }
  // A damaged snapshot written before a run drained would not be resumed from anyway.
  for (const auto& d : all.damaged)
    if ((!latest || !d.id || *d.id > latest->id) && !drained.covers(d.id, d.written_ms))
      return fail(d.error + "\n" + d.dir.string() + " is newer than " +
                  (latest ? latest->dir.string() : std::string("any readable checkpoint")) +
                  ": resuming from an older one could publish output twice; delete it, or choose a snapshot with "
                  "--from-savepoint");
  if (!latest) return std::optional<fs::path>{};
  if (drained.covers(latest->id, latest->created_at)) return std::optional<fs::path>{};
  return std::optional<fs::path>{latest->dir};
}

Result<void> mark_restored(const fs::path& root, const fs::path& snapshot, std::uint64_t id) {
  toml::table t;
  t.insert("restored", fs::absolute(checkpoint_dir_of(snapshot)).lexically_normal().string());
  t.insert("restored_id", static_cast<std::int64_t>(id));
  t.insert("superseding", static_cast<std::int64_t>(next_checkpoint_id(root) - 1));
  std::ostringstream out;
  out << "# streamctl: the snapshot the job's last run started from (checkpoint_metadata.hpp)\n" << t << "\n";
  return state::write_file_durably(root / "restored", out.str());
}

Result<void> mark_drained(const fs::path& root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return {};
  auto now = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch());
  // Every snapshot under root now has an id below next_checkpoint_id; the job's next runs
  // take larger ones. The time stays for a person, and for snapshots named without an id.
  return state::write_file_durably(root / "drained", "checkpoint " + std::to_string(next_checkpoint_id(root) - 1) +
                                                         " at " + std::to_string(now.count()) + "\n");
}

std::uint64_t next_checkpoint_id(const fs::path& root) {
  std::uint64_t next = 1;
  // Past the snapshot the last run started from, wherever it is (a damaged record: below).
  if (auto restored = read_restored(root); restored && *restored)
    next = std::max({next, (*restored)->id + 1, (*restored)->superseding + 1});
  for_each_snapshot_id(root, {}, [&](std::uint64_t id) { next = std::max(next, id + 1); });
  return next;
}

Result<std::optional<std::uint64_t>> newest_snapshot_id(const fs::path& root, const fs::path& except) {
  auto drained = read_drained(root);
  if (!drained) return Failure{drained.error()};
  std::error_code ec;
  if (fs::exists(root / "drained", ec) && !drained->last_id)
    return fail((root / "drained").string() + " records when a run drained, not which snapshots it covered");
  std::optional<std::uint64_t> newest = drained->last_id;
  auto note = [&](std::uint64_t id) { newest = std::max(newest.value_or(0), id); };
  auto restored = read_restored(root);
  if (!restored) return Failure{restored.error()};
  if (*restored) {
    note((*restored)->id);
    note((*restored)->superseding);
  }
  for_each_snapshot_id(root, except, note);
  return newest;
}

std::vector<std::string> prune_checkpoints(const fs::path& root, int retain, std::optional<std::uint64_t> in_flight) {
  std::vector<std::string> problems;
  Listing listing = list_under(root, false);
  const auto& completed = listing.completed;
  std::vector<fs::path> doomed;
  auto keep = static_cast<std::size_t>(std::max(retain, 1));
  for (std::size_t k = 0; k + keep < completed.size(); ++k) doomed.push_back(completed[k].dir);
  // A damaged checkpoint that a newer one supersedes is no use to anyone; a newer damaged one
  // stays for a person to look at (latest_restorable refuses to skip it).
  if (!completed.empty())
    for (const auto& d : listing.damaged)
      if (d.id && *d.id < completed.back().id) doomed.push_back(d.dir);
  // A chk-N without _metadata is a checkpoint that failed or was interrupted (a full disk, a
  // timeout, a crash): never restored, so nothing but the one being written is kept.
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    auto n = checkpoint_number(entry.path().filename().string());
    std::error_code exists;
    if (n && n != in_flight && !fs::exists(entry.path() / kMetadataFile, exists) && !exists)
      doomed.push_back(entry.path());
  }
  // What the retained checkpoints build on (incremental checkpoints) stays. The checkpoint
  // being written now builds on the newest completed one, which is retained.
  std::set<fs::path> needed;
  for (std::size_t k = completed.size() > keep ? completed.size() - keep : 0; k < completed.size(); ++k)
    needed.insert(completed[k].previous.begin(), completed[k].previous.end());
  for (const auto& dir : doomed) {
    std::error_code rm;
    // The metadata goes first: a half-deleted checkpoint must never look complete.
    fs::remove(dir / kMetadataFile, rm);
    if (rm) {
      problems.push_back("cannot delete old checkpoint " + dir.string() + ": " + rm.message());
      continue;
    }
    bool kept = false;
    for (const auto& entry : fs::directory_iterator(dir, rm)) {
      if (needed.count(entry.path().lexically_normal())) {
        kept = true;
        continue;
      }
      std::error_code file_rm;
      fs::remove_all(entry.path(), file_rm);
      if (file_rm) problems.push_back("cannot delete " + entry.path().string() + ": " + file_rm.message());
    }
    if (!kept) fs::remove(dir, rm);
    // Gone already is what was wanted.
    if (rm && rm != std::errc::no_such_file_or_directory)
      problems.push_back("cannot delete old checkpoint " + dir.string() + ": " + rm.message());
  }
  return problems;
}

} // namespace streamctl::runtime
