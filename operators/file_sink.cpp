#include "operators/file_sink.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <optional>
#include <set>
#include <sys/file.h>
#include <unistd.h>
#include <utility>

#include "operators/fd_writer.hpp"
#include "operators/source_position.hpp"
#include "operators/text_format.hpp"
#include "operators/text_format_schema.hpp"

namespace streamctl::operators {

namespace {

constexpr std::size_t kFlushBytes = 1 << 20;

// What pre_commit appends, version 1 (integers little-endian, str = u32 length + bytes):
//
//   u8  version = 1
//   u8  kind = 'K'
//   u64 checkpoint id
//   u32 subtask that wrote it
//   u64 next part number that subtask would use
//   u32 files: the part files prepared and not yet published, this checkpoint's and earlier
//   per file: u64 checkpoint id it was prepared for, str final name (`part-<s>-<n>.<ext>`; the
//             prepared file is the same name with a leading '.')
constexpr std::uint8_t kSinkStateVersion = 1;

// A descriptor closed on destruction. A part file's descriptor stays open, holding an
// exclusive flock, until the part is published or discarded: that is how a run starting
// tells its own leftovers (nobody holds them) from the files of a live writer.
class HeldFile {
public:
  HeldFile() = default;
  explicit HeldFile(int fd) : fd_(fd) {}
  HeldFile(HeldFile&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  HeldFile& operator=(HeldFile&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  ~HeldFile() { reset(); }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

private:
  int fd_ = -1;
};

struct Prepared {
  std::uint64_t checkpoint = 0;
  std::string name; // final name, in the sink's directory
  HeldFile held;    // its descriptor, locked, while this run prepared it; empty after a restore
};

// `part-<subtask>-<n>.<extension>`: the subtask and n, or nullopt for any other name.
std::optional<std::pair<std::uint64_t, std::uint64_t>> parse_part_name(std::string_view name,
                                                                     std::string_view extension) {
  std::string_view rest = name;
  if (rest.substr(0, 5) != "part-") return std::nullopt;
  rest.remove_prefix(5);
  std::uint64_t numbers[2] = {0, 0};
  for (int k = 0; k < 2; ++k) {
    std::size_t digits = 0;
    while (digits < rest.size() && digits < 18 && rest[digits] >= '0' && rest[digits] <= '9') {
      numbers[k] = numbers[k] * 10 + static_cast<std::uint64_t>(rest[digits] - '0');
      ++digits;
    }
    if (digits == 0 || digits == rest.size()) return std::nullopt;
    if (rest[digits] != (k == 0 ? '-' : '.')) return std::nullopt;
    rest.remove_prefix(digits + 1);
  }
  if (rest != extension) return std::nullopt;
  return std::make_pair(numbers[0], numbers[1]);
}

class FileSink final : public Sink {
public:
  FileSink(const pipeline::NodeSpec& node, state::FieldNames& names, std::filesystem::path dir)
      : node_(node), names_(names), dir_(std::move(dir)) {
    std::string format = node.config["format"].value_or(std::string("json"));
    extension_ = format == "lines" ? "txt" : format;
  }

  ~FileSink() override {
    if (fd_ >= 0) abort();
  }
  FileSink(const FileSink&) = delete;
  FileSink& operator=(const FileSink&) = delete;

  void open(OperatorContext& ctx) override {
    Sink::open(ctx);
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    if (ec) {
      errno = ec.value();
      fail_io("cannot create directory", dir_);
    }
    // The part file opens with the first write (or at finish), so that restore_pending, called
    // after open, sees no file of this run among those a crash left behind.
  }

  void write(const state::Batch& in) override {
    if (fd_ < 0) start_part();
    encoder_->encode(in, buffer_);
    if (buffer_.size() >= kFlushBytes) flush();
  }

  void pre_commit(std::uint64_t checkpoint_id, std::string& out) override {
    if (fd_ >= 0 && (written_ > 0 || !buffer_.empty())) {
      HeldFile held = close_part();
      sync_dir(); // the prepared file's name must survive a crash too
      prepared_.push_back(Prepared{checkpoint_id, final_name_, std::move(held)});
    }
    // An empty part stays in progress: no empty file per checkpoint.
    PositionWriter w(out, kSinkStateVersion, 'K');
    w.u64(checkpoint_id);
    w.u32(static_cast<std::uint32_t>(ctx_.subtask));
    w.u64(next_n_);
    w.u32(static_cast<std::uint32_t>(prepared_.size()));
    for (const auto& p : prepared_) {
      w.u64(p.checkpoint);
      w.str(p.name);
    }
  }

  void commit(std::uint64_t checkpoint_id) override {
    bool renamed = false;
    std::vector<Prepared> rest;
    for (auto& p : prepared_) {
      if (p.checkpoint <= checkpoint_id) {
        publish(p.name, false);
        renamed = true;
      } else {
        rest.push_back(std::move(p));
      }
    }
    prepared_ = std::move(rest);
    if (renamed) {
      published_any_ = true;
      sync_dir();
    }
  }

  Result<void> restore_pending(const std::vector<std::string_view>& old_subtasks) override {
    leftovers_handled_ = true;
    // Parse everything before touching a file: a corrupt state changes nothing.
    std::vector<std::vector<Prepared>> files(old_subtasks.size());
    std::set<std::string> covered;
    for (std::size_t s = 0; s < old_subtasks.size(); ++s) {
      if (old_subtasks[s].empty()) continue;
      PositionReader r(old_subtasks[s], "pending output of sink '" + ctx_.node->name + "' subtask " + std::to_string(s));
      if (auto ok = r.header(kSinkStateVersion, 'K'); !ok) return ok;
      auto checkpoint = r.u64();
      if (!checkpoint) return Failure{checkpoint.error()};
      auto subtask = r.u32();
      if (!subtask) return Failure{subtask.error()};
      if (*subtask != s) return r.failure("written by subtask " + std::to_string(*subtask));
      auto next = r.u64();
      if (!next) return Failure{next.error()};
      auto count = r.u32();
      if (!count) return Failure{count.error()};
      if (*count > r.remaining() / 12) return r.failure("file count " + std::to_string(*count) + " exceeds the data");
      for (std::uint32_t k = 0; k < *count; ++k) {
        auto prepared_for = r.u64();
        if (!prepared_for) return Failure{prepared_for.error()};
        auto name = r.str(4096);
        if (!name) return Failure{name.error()};
        auto part = parse_part_name(*name, extension_);
        if (!part || part->first != s) return r.failure("bad part file name '" + *name + "'");
        if (*prepared_for > *checkpoint) return r.failure("'" + *name + "' prepared for a later checkpoint");
        covered.insert(*name);
        files[s].push_back(Prepared{*prepared_for, std::move(*name), HeldFile{}});
      }
      if (auto ok = r.end(); !ok) return ok;
      if (s % static_cast<std::size_t>(ctx_.parallelism) == static_cast<std::size_t>(ctx_.subtask))
        next_n_ = std::max(next_n_, *next);
    }
    // This subtask publishes the files of the old subtasks dealt to it (s mod parallelism),
    // so that no two new subtasks rename the same file.
    auto mine = [&](std::uint64_t s) {
      return s % static_cast<std::uint64_t>(ctx_.parallelism) == static_cast<std::uint64_t>(ctx_.subtask);
    };
    for (std::size_t s = 0; s < files.size(); ++s) {
      if (!mine(s)) continue;
      for (const auto& p : files[s])
        if (auto ok = publish(p.name, true); !ok) return ok;
    }
    // Any other part in progress of those subtasks was written after the checkpoint: discard.
    return discard_leftovers(covered, false);
  }

  void finish() override {
    // Without checkpoints, the one part file; with them, what the last checkpoint left.
    if (fd_ < 0 && prepared_.empty() && !published_any_) start_part();
    if (fd_ >= 0) {
      HeldFile held = close_part();
      prepared_.push_back(Prepared{0, final_name_, std::move(held)});
    }
    for (const auto& p : prepared_) publish(p.name, false);
    prepared_.clear();
    published_any_ = true;
    sync_dir();
  }

  void abort() override {
    // Files prepared for a checkpoint stay: it may have completed, and a restore publishes them.
    if (fd_ < 0) return;
    ::unlink((dir_ / ("." + final_name_)).c_str());
    ::close(fd_);
    fd_ = -1;
  }

  void cancel(std::uint64_t completed) override {
    abort();
    // No checkpoint after `completed` completes now (Sink::cancel): nothing will publish their
    // files, and a restore of an earlier checkpoint writes their records again. Files of
    // `completed` and before stay: a final checkpoint's are published at RELEASE, which a
    // failure may have pre-empted, and a restore from it publishes them.
    bool dropped = false;
    for (const auto& p : prepared_)
      if (p.checkpoint > completed) {
        ::unlink((dir_ / ("." + p.name)).c_str());
        dropped = true;
      }
    if (dropped) sync_dir();
    prepared_.clear();
  }

private:
  // Opens the next part file in progress, with a number no file of this subtask has. A run
  // that restored nothing first discards what earlier runs of its subtasks left in progress.
  void start_part() {
    if (!leftovers_handled_) {
      leftovers_handled_ = true;
      if (auto ok = discard_leftovers({}, true); !ok) throw Error(ErrorKind::JobFailed, ok.error());
    }
    std::string prefix = "part-" + std::to_string(ctx_.subtask) + "-";
    for (;; ++next_n_) {
      std::string name = prefix + std::to_string(next_n_) + "." + extension_;
      if (std::filesystem::exists(dir_ / name)) continue;
      fd_ = ::open((dir_ / ("." + name)).c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd_ < 0 && errno == EEXIST) continue;
      if (fd_ < 0) fail_io("cannot create", dir_ / ("." + name));
      // A new file: no one else can hold its lock. Held until it is published or discarded.
      ::flock(fd_, LOCK_EX | LOCK_NB);
      final_name_ = name;
      ++next_n_;
      written_ = 0;
      writeback_.reset();
      encoder_.emplace(node_, names_); // a csv part starts with its header

      return;
    }
  }

  // Flushes and fsyncs the part in progress; returns its descriptor, which keeps it locked.
  HeldFile close_part() {
    flush();
    if (::fsync(fd_) != 0) fail_io("cannot fsync", dir_ / ("." + final_name_));
    return HeldFile(std::exchange(fd_, -1));
  }

  // Deletes the parts in progress (".part-S-N") of the old subtasks S this subtask takes over
  // (S mod parallelism), except those in `keep` (prepared for the restored checkpoint): what a
  // killed worker or an earlier run left. With `spare_held`, a part that a live writer holds
  // (flock) is kept too: a fresh run cannot tell an earlier run of its own from another job
  // writing into the same directory; a restore runs after the coordinator has reaped the
  // job's old workers. Notes the numbers used so that none is reused.
  Result<void> discard_leftovers(const std::set<std::string>& keep, bool spare_held) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
      std::string name = entry.path().filename().string();
      bool in_progress = !name.empty() && name[0] == '.';
      auto part = parse_part_name(std::string_view(name).substr(in_progress ? 1 : 0), extension_);
      if (!part) continue;
      // Never reuse a number seen here, even one deleted now: a straggler of the old run may
      // still hold that file open.
      if (part->first == static_cast<std::uint64_t>(ctx_.subtask)) next_n_ = std::max(next_n_, part->second + 1);
      bool mine = part->first % static_cast<std::uint64_t>(ctx_.parallelism) == static_cast<std::uint64_t>(ctx_.subtask);
      if (!in_progress || !mine || keep.count(name.substr(1)) > 0) continue;
      int fd = ::open(entry.path().c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) continue; // gone meanwhile
      bool held = spare_held && ::flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
      int unlinked = held ? 0 : ::unlink(entry.path().c_str());
      int error = errno;
      ::close(fd);
      if (!held && unlinked != 0 && error != ENOENT)
        return fail("sink '" + ctx_.node->name + "': cannot delete '" + entry.path().string() +
                    "': " + std::strerror(error));
    }
    if (ec) return fail("sink '" + ctx_.node->name + "': cannot list '" + dir_.string() + "': " + ec.message());
    sync_dir();
    return {};
  }

  // Renames `.name` to `name`. With `restoring`, a file already renamed is fine and a missing
  // one a failure; otherwise a failure throws.
  Result<void> publish(const std::string& name, bool restoring) {
    std::filesystem::path temp = dir_ / ("." + name);
    std::filesystem::path final_path = dir_ / name;
    if (::rename(temp.c_str(), final_path.c_str()) == 0) return {};
    if (errno == ENOENT && std::filesystem::exists(final_path)) return {};
    if (!restoring) fail_io("cannot rename", temp);
    if (errno == ENOENT)
      return fail("sink '" + ctx_.node->name + "': the snapshot's output '" + name + "' is in neither '" +
                  temp.string() + "' nor '" + final_path.string() +
                  "': was the sink's path changed since? Restore with the path it had, or copy its files there");
    return fail("sink '" + ctx_.node->name + "': cannot publish '" + temp.string() + "': " + std::strerror(errno));
  }

  void sync_dir() {
    int dir_fd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd >= 0) {
      ::fsync(dir_fd);
      ::close(dir_fd);
    }
  }

  void flush() {
    if (buffer_.empty()) return;
    auto written = write_all(fd_, buffer_);
    if (!written) fail_io("cannot write", dir_ / ("." + final_name_));
    written_ += buffer_.size();
    buffer_.clear();
    writeback_.wrote(fd_, written_);
  }

  [[noreturn]] void fail_io(const char* what, const std::filesystem::path& path) {
    throw Error(ErrorKind::JobFailed, "sink '" + ctx_.node->name + "': " + what + " '" + path.string() +
                                          "': " + std::strerror(errno));
  }

  const pipeline::NodeSpec& node_;
  state::FieldNames& names_;
  std::optional<LineEncoder> encoder_; // of the part in progress
  std::filesystem::path dir_;
  std::string extension_;
  std::string final_name_;         // of the part in progress
  int fd_ = -1;                    // the part in progress, or -1
  std::uint64_t written_ = 0;      // bytes written to it
  WritebackPacer writeback_;       // of the part in progress
  std::uint64_t next_n_ = 0;       // the next part number to try
  std::vector<Prepared> prepared_; // closed, fsynced, waiting for their checkpoint
  bool published_any_ = false;
  bool leftovers_handled_ = false; // leftovers of earlier runs are dealt with (restore_pending or start_part)
  std::string buffer_;
};

} // namespace

pipeline::NodeTypeSchema file_sink_schema() {
  pipeline::NodeTypeSchema schema{"file", text_format_keys()};
  schema.keys.insert(schema.keys.begin(),
                     pipeline::KeySchema{"path", pipeline::KeyType::String, true, {}, {},
                                         "directory of part files, relative to the pipeline file"});
  return schema;
}

std::unique_ptr<Sink> make_file_sink(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node,
                                     state::FieldNames& names) {
  std::filesystem::path dir = node.config["path"].value_or(std::string());
  if (dir.is_relative()) dir = spec.base_dir / dir;
  dir = dir.lexically_normal();
  // Check without creating anything (`validate` must have no side effects): the directory, or
  // its nearest existing ancestor, must be a writable directory.
  std::filesystem::path existing = dir;
  while (!existing.empty() && !std::filesystem::exists(existing) && existing != existing.parent_path())
    existing = existing.parent_path();
  auto where = pipeline::position_of(spec, node, "path") + ": sink '" + node.name + "': ";
  if (!std::filesystem::is_directory(existing))
    throw Error(ErrorKind::Usage, where + "cannot create directory '" + dir.string() + "': '" +
                                      existing.string() + "' is not a directory");
  if (::access(existing.c_str(), W_OK) != 0)
    throw Error(ErrorKind::Usage, where + "cannot write to '" + existing.string() + "': " + std::strerror(errno));
  return std::make_unique<FileSink>(node, names, std::move(dir));
}

} // namespace streamctl::operators
