#include "operators/file_source.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <glob.h>
#include <optional>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

#include "operators/file_position.hpp"
#include "operators/line_source.hpp"
#include "operators/text_format_schema.hpp"
#include "state/error.hpp"

namespace streamctl::operators {

std::vector<std::string> expand_glob(const std::filesystem::path& base_dir, const std::string& pattern) {
  std::filesystem::path full = std::filesystem::path(pattern).is_absolute() ? std::filesystem::path(pattern)
                                                                           : base_dir / pattern;
  glob_t g{};
  std::vector<std::string> files;
  if (::glob(full.c_str(), 0, nullptr, &g) == 0) {
    for (std::size_t k = 0; k < g.gl_pathc; ++k) {
      struct stat st {};
      if (::stat(g.gl_pathv[k], &st) == 0 && S_ISREG(st.st_mode)) files.emplace_back(g.gl_pathv[k]);
    }
  }
  ::globfree(&g);
  std::sort(files.begin(), files.end());
  return files;
}

namespace {

// The position format is drawn in operators/file_position.hpp.

struct FileProgress {
  LineProgress at;
  bool done = false;
  std::optional<FileIdentity> identity; // of the file read: set once it is opened or resumed
};

// A matching file as stat(2) saw it when the source was restored.
struct Present {
  bool ok = false;
  int error = 0; // errno when not ok
  std::uint64_t device = 0;
  std::uint64_t inode = 0;
  std::uint64_t size = 0;
  std::optional<std::string> first; // its first bytes, once read
};

class FileSource final : public LineSource {
public:
  // `keys`: the names positions record, one per file of `files`.
  FileSource(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node, state::FieldNames& names,
             std::vector<std::string> files, std::vector<std::string> keys)
      : LineSource(spec, node, names), files_(std::move(files)), keys_(std::move(keys)),
        progress_(files_.size()) {}

  void open(OperatorContext& ctx) override {
    LineSource::open(ctx);
    next_ = static_cast<std::size_t>(ctx.subtask);
  }

  void snapshot_position(std::string& out) const override {
    auto live = current_progress();
    std::vector<FilePositionEntry> listed;
    for (std::size_t k = static_cast<std::size_t>(ctx_.subtask); k < files_.size();
         k += static_cast<std::size_t>(ctx_.parallelism)) {
      bool reading = live.has_value() && k == current_;
      if (!(reading || progress_[k].done || progress_[k].at.offset > 0 || progress_[k].at.line > 0)) continue;
      const LineProgress& at = reading ? *live : progress_[k].at;
      std::optional<FileIdentity> identity = progress_[k].identity;
      // The fingerprint must cover what was consumed (up to its length): a file that was
      // shorter when opened is fingerprinted again over what it has now.
      if (reading && identity && identity->fingerprint_bytes < std::min<std::uint64_t>(at.offset, kFingerprintBytes)) {
        auto now = identify_file(current_fd_);
        if (!now) throw Error(ErrorKind::JobFailed, "source '" + ctx_.node->name + "': '" + files_[k] + "': " + now.error());
        identity = *now;
      }
      if (!identity)
        throw Error(ErrorKind::Internal, "source '" + ctx_.node->name + "': no identity for '" + files_[k] + "'");
      listed.push_back(FilePositionEntry{keys_[k], identity, at.offset, at.line, progress_[k].done, at.header});
    }
    write_file_position(out, listed);
  }

  // Which recorded file each matching file is, by identity rather than by name (log
  // rotation renames, replaces and truncates files between runs); see the man page, FILE
  // SOURCE, for the rules in a user's words.
  Result<void> restore_position(const std::vector<std::string_view>& old_subtasks) override {
    recorded_.clear();
    std::set<std::string> names;
    for (std::size_t s = 0; s < old_subtasks.size(); ++s) {
      if (old_subtasks[s].empty()) continue; // that subtask had started nothing
      auto files = read_file_position(old_subtasks[s], "position of source '" + ctx_.node->name + "' subtask " +
                                                           std::to_string(s));
      if (!files) return Failure{files.error()};
      for (auto& f : *files) {
        if (!names.insert(f.name).second)
          return fail("position of source '" + ctx_.node->name + "': file '" + f.name + "' recorded twice");
        recorded_.push_back(std::move(f));
      }
    }
    if (recorded_.empty()) return {};
    present_.assign(files_.size(), Present{});
    for (std::size_t k = 0; k < files_.size(); ++k) {
      struct stat st {};
      if (::stat(files_[k].c_str(), &st) != 0) {
        present_[k].error = errno;
        continue;
      }
      present_[k] = Present{true, 0, static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino),
                            static_cast<std::uint64_t>(st.st_size), std::nullopt};
    }
    for (std::size_t k = static_cast<std::size_t>(ctx_.subtask); k < files_.size();
         k += static_cast<std::size_t>(ctx_.parallelism))
      if (auto ok = restore_file(k); !ok) return ok;
    if (ctx_.subtask == 0) report_gone();
    recorded_.clear();
    present_.clear();
    return {};
  }

  void ends_with_savepoint() override { hold_unterminated_line_ = true; }

protected:
  // A cron job (`--resume --savepoint-on-exit`) may read a file while a writer is half-way
  // through appending a line: reading that fragment as a record, and its rest as another in
  // the next run, would lose the record. So such a run leaves it for the next one.
  bool holds_unterminated_line() const override { return hold_unterminated_line_; }
  void unterminated_line_held(std::size_t bytes, std::uint64_t line) override {
    warn("'" + files_[current_] + "' ends in an unterminated line (line " + std::to_string(line) + ", " +
         std::to_string(bytes) + " bytes): left for the next run, which reads it once it ends in a newline");
  }

  std::optional<Input> open_next_input() override {
    for (; next_ < files_.size(); next_ += static_cast<std::size_t>(ctx_.parallelism)) {
      std::size_t k = next_;
      const std::string& path = files_[k];
      int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0)
        throw Error(ErrorKind::JobFailed, "source '" + ctx_.node->name + "': cannot open '" + path +
                                              "': " + std::strerror(errno));
      std::uint64_t offset = progress_[k].at.offset;
      if (progress_[k].done) {
        // Read to its end before: go on only if it has grown since (`run --resume` over
        // growing input).
        struct stat st {};
        if (::fstat(fd, &st) != 0 || static_cast<std::uint64_t>(st.st_size) <= offset) {
          ::close(fd);
          continue;
        }
      }
      auto identity = identify_file(fd);
      if (!identity) {
        ::close(fd);
        throw Error(ErrorKind::JobFailed, "source '" + ctx_.node->name + "': '" + path + "': " + identity.error());
      }
      progress_[k].identity = *identity;
      if (offset > 0 && ::lseek(fd, static_cast<off_t>(offset), SEEK_SET) < 0) {
        int e = errno;
        ::close(fd);
        throw Error(ErrorKind::JobFailed, "source '" + ctx_.node->name + "': cannot seek in '" + path +
                                              "': " + std::strerror(e));
      }
      ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
      progress_[k].done = false;
      current_ = k;
      current_fd_ = fd;
      next_ += static_cast<std::size_t>(ctx_.parallelism);
      return Input{fd, progress_[k].at};
    }
    return std::nullopt;
  }
  void close_input(int fd, const LineProgress& at) override {
    std::optional<FileIdentity> identity = progress_[current_].identity;
    if (identity && identity->fingerprint_bytes < std::min<std::uint64_t>(at.offset, kFingerprintBytes)) {
      auto now = identify_file(fd);
      if (!now) {
        ::close(fd);
        throw Error(ErrorKind::JobFailed, "source '" + ctx_.node->name + "': '" + files_[current_] + "': " + now.error());
      }
      identity = *now;
    }
    ::close(fd);
    progress_[current_] = FileProgress{at, true, identity};
    current_ = kNone;
    current_fd_ = -1;
  }
  bool blocking_reads() const override { return true; }

private:
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);

  // A file whose identity cannot be established is refused (exit 3): reading it from its
  // start might repeat records, and from the recorded offset lose them.
  Failure refuse(std::size_t k, const std::string& why) const {
    return fail("source '" + ctx_.node->name + "': cannot tell which file '" + files_[k] + "' is: " + why);
  }
  void warn(const std::string& message) const {
    if (ctx_.warn) ctx_.warn("source '" + ctx_.node->name + "': " + message);
  }
  static std::string inode_text(std::uint64_t device, std::uint64_t inode) {
    return "device " + std::to_string(device) + " inode " + std::to_string(inode);
  }

  // The first bytes of file `k` (up to kFingerprintBytes), read once per restore.
  Result<std::string_view> first_bytes(std::size_t k) {
    if (!present_[k].first) {
      int fd = ::open(files_[k].c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) return fail(std::string("cannot open it: ") + std::strerror(errno));
      auto bytes = read_first_bytes(fd);
      ::close(fd);
      if (!bytes) return Failure{bytes.error()};
      present_[k].first = std::move(*bytes);
    }
    return std::string_view(*present_[k].first);
  }

  // Whether file `k` starts with the bytes `id` fingerprinted.
  Result<bool> starts_with(std::size_t k, const FileIdentity& id) {
    auto first = first_bytes(k);
    if (!first) return Failure{first.error()};
    return starts_with_fingerprint(*first, id);
  }

  // Whether file `k` is the file `e` recorded, grown or not: the same device and inode, its
  // first bytes unchanged, and at least the bytes consumed.
  Result<bool> is_intact(std::size_t k, const FilePositionEntry& e) {
    const Present& p = present_[k];
    if (!p.ok || !e.identity || p.device != e.identity->device || p.inode != e.identity->inode) return false;
    if (p.size < e.offset) return false;
    return starts_with(k, *e.identity);
  }

  // The matching file that holds `e`'s device and inode, if any.
  std::optional<std::size_t> holder_of(const FilePositionEntry& e) const {
    if (!e.identity) return std::nullopt;
    std::optional<std::size_t> found;
    for (std::size_t k = 0; k < files_.size(); ++k)
      if (present_[k].ok && present_[k].device == e.identity->device && present_[k].inode == e.identity->inode)
        if (!found || keys_[k] == e.name) found = k;
    return found;
  }

  // Goes on reading file `k` where `e` was, with the identity it has now.
  Result<void> resume(std::size_t k, const FilePositionEntry& e) {
    int fd = ::open(files_[k].c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return refuse(k, std::string("cannot open it: ") + std::strerror(errno));
    auto identity = identify_file(fd);
    ::close(fd);
    if (!identity) return refuse(k, identity.error());
    progress_[k] = FileProgress{LineProgress{e.offset, e.line, e.header}, e.done, *identity};
    return {};
  }

  Result<void> restore_file(std::size_t k) {
    const Present& p = present_[k];
    if (!p.ok) return refuse(k, std::string("cannot stat it: ") + std::strerror(p.error));
    const std::string& path = files_[k];

    // 1. The file with the device and inode of a recorded one: it, if its first bytes are
    //    unchanged and it is not shorter than what was read (maybe renamed: a glob's rotation).
    const FilePositionEntry* same = nullptr;
    for (const auto& e : recorded_)
      if (e.identity && e.identity->device == p.device && e.identity->inode == p.inode)
        if (same == nullptr || e.name == keys_[k]) same = &e;
    if (same != nullptr) {
      auto intact = is_intact(k, *same);
      if (!intact) return refuse(k, intact.error());
      if (*intact) {
        if (same->name != keys_[k])
          warn("'" + path + "' is '" + same->name + "' of the snapshot, renamed since: going on at byte " +
               std::to_string(same->offset));
        return resume(k, *same);
      }
      if (same->offset > 0)
        warn("'" + path + "' was truncated or rewritten in place since the snapshot (it has " + std::to_string(p.size) +
             " bytes, " + std::to_string(same->offset) + " were read, and its first bytes " +
             (p.size < same->identity->fingerprint_bytes ? "are gone" : "may differ") +
             "): reading it from its start");
      return {};
    }

    // 2. Another inode that starts with the bytes of a recorded file no longer found intact:
    //    a copy of it (copytruncate's copy, a copy moved over it, a filesystem mounted again
    //    with another device number) when a whole fingerprint matches; with fewer bytes, a
    //    copy cannot be told from a new file that starts alike.
    const FilePositionEntry* copy_of = nullptr;
    const FilePositionEntry* undecided = nullptr;
    for (const auto& e : recorded_) {
      if (!e.identity || e.offset == 0 || p.size < e.offset) continue;
      auto starts = starts_with(k, *e.identity);
      if (!starts) return refuse(k, starts.error());
      if (!*starts) continue;
      if (auto holder = holder_of(e)) {
        auto intact = is_intact(*holder, e);
        if (!intact) return refuse(k, "'" + files_[*holder] + "': " + intact.error());
        if (*intact) continue; // the file read is still there: this one is another
      }
      if (e.identity->fingerprint_bytes == kFingerprintBytes) {
        if (copy_of == nullptr || e.name == keys_[k]) copy_of = &e;
      } else {
        undecided = &e;
      }
    }
    if (copy_of != nullptr) {
      warn("'" + path + "' is not the file '" + copy_of->name + "' the snapshot read (" +
           inode_text(copy_of->identity->device, copy_of->identity->inode) + ", now " + inode_text(p.device, p.inode) +
           ") but starts with the same " + std::to_string(kFingerprintBytes) +
           " bytes: taking it for a copy of it, going on at byte " + std::to_string(copy_of->offset));
      return resume(k, *copy_of);
    }
    if (undecided != nullptr)
      return refuse(k, "it is not the file '" + undecided->name + "' the snapshot read (" +
                           inode_text(undecided->identity->device, undecided->identity->inode) + ", now " +
                           inode_text(p.device, p.inode) + ") but starts with the same " +
                           std::to_string(undecided->identity->fingerprint_bytes) +
                           " bytes, too few to tell a copy of it from a new file that starts alike; move it out of "
                           "the source's path, or run without --resume to read everything again");

    // 3. Another file at a recorded name: the recorded one was replaced, or renamed away.
    const FilePositionEntry* named = nullptr;
    for (const auto& e : recorded_)
      if (e.name == keys_[k]) named = &e;
    if (named == nullptr) return {}; // new since the snapshot: read it all
    if (!named->identity) {
      // A version 1 position (written before identities were recorded): the file at the name
      // is taken for the one read, as streamctl did then, unless it is shorter than that.
      if (p.size < named->offset)
        return fail("source '" + ctx_.node->name + "': '" + path + "' has " + std::to_string(p.size) +
                    " bytes, fewer than the " + std::to_string(named->offset) +
                    " already read: it was truncated or replaced since the snapshot");
      if (named->offset > 0)
        warn("the snapshot's position of '" + path +
             "' records no file identity (written by an older streamctl): taking the file there for the one "
             "read, going on at byte " + std::to_string(named->offset));
      return resume(k, *named);
    }
    if (named->offset == 0) return {}; // nothing of it was consumed
    if (auto holder = holder_of(*named))
      warn("'" + path + "' is a new file (the one the snapshot read there is now '" + files_[*holder] +
           "'): reading it from its start");
    else
      warn("'" + path + "' is not the file the snapshot read (" +
           inode_text(named->identity->device, named->identity->inode) + ", now " + inode_text(p.device, p.inode) +
           "): it was replaced; reading it from its start");
    return {};
  }

  // Recorded files that no matching file is or replaces: rotated out of `path`, or deleted.
  void report_gone() const {
    std::set<std::string> keys(keys_.begin(), keys_.end());
    for (const auto& e : recorded_) {
      if (keys.count(e.name) > 0 || holder_of(e)) continue;
      warn("'" + e.name + "' of the snapshot no longer matches path (rotated away or deleted): lines added to it "
           "after byte " + std::to_string(e.offset) + " are not read");
    }
  }

  std::vector<std::string> files_;
  std::vector<std::string> keys_;
  std::vector<FileProgress> progress_; // by file; only this subtask's files are used
  std::size_t next_ = 0;               // next file to open
  std::size_t current_ = kNone;        // file being read
  int current_fd_ = -1;                // ... and its descriptor
  bool hold_unterminated_line_ = false; // the run ends with a savepoint (ends_with_savepoint)
  // During restore_position only: what the snapshot recorded and what the glob matches now.
  std::vector<FilePositionEntry> recorded_;
  std::vector<Present> present_;
};
} // namespace

pipeline::NodeTypeSchema file_source_schema() {
  pipeline::NodeTypeSchema schema{"file", text_format_keys()};
  schema.keys.insert(schema.keys.begin(),
                     pipeline::KeySchema{"path", pipeline::KeyType::String, true, {}, {},
                                         "file or glob, relative to the pipeline file"});
  return schema;
}

std::unique_ptr<Source> make_file_source(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node,
                                         state::FieldNames& names) {
  std::string pattern = node.config["path"].value_or(std::string());
  auto files = expand_glob(spec.base_dir, pattern);
  if (files.empty())
    throw Error(ErrorKind::Usage, pipeline::position_of(spec, node, "path") + ": source '" + node.name +
                                      "': no file matches '" + pattern + "'");
  for (const auto& f : files)
    if (::access(f.c_str(), R_OK) != 0)
      throw Error(ErrorKind::Usage, pipeline::position_of(spec, node, "path") + ": source '" + node.name +
                                        "': cannot read '" + f + "': " + std::strerror(errno));
  std::vector<std::string> keys;
  for (const auto& f : files)
    keys.push_back(std::filesystem::path(pattern).is_absolute()
                       ? f
                       : std::filesystem::path(f).lexically_relative(spec.base_dir).string());
  return std::make_unique<FileSource>(spec, node, names, std::move(files), std::move(keys));
}

} // namespace streamctl::operators
