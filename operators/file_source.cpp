#include "operators/file_source.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <glob.h>
#include <map>
#include <optional>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

#include "operators/file_position.hpp"
#include "operators/file_ranges.hpp"
#include "operators/followed_file_source.hpp"
#include "operators/line_source.hpp"
#include "operators/text_format_schema.hpp"
#include "pipeline/spec/units.hpp"
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

std::string file_position_key(const pipeline::PipelineSpec& spec, const std::string& pattern, const std::string& file) {
  return std::filesystem::path(pattern).is_absolute() ? file
                                                      : std::filesystem::path(file).lexically_relative(spec.base_dir).string();
}

namespace {

// The position format is drawn in operators/file_position.hpp.

// One range of a file (file_ranges.hpp), or the whole file when it is not split.
struct RangeProgress {
  LineProgress at;
  bool done = false;
};

// What this subtask knows of a matching file.
struct FileState {
  std::optional<FileIdentity> identity; // of the file read: set once it is opened or resumed
  std::uint64_t range_bytes = 0;        // 0: read whole by one subtask
  // The ranges started or done: this subtask's, and after a restore every recorded one (a
  // snapshot lists only the ranges this subtask owns now).
  std::map<std::uint64_t, RangeProgress> ranges;
  // Line starts whose line numbers are known (offset -> lines before it), to count from.
  std::map<std::uint64_t, std::uint64_t> known_lines{{0, 0}};
  std::uint64_t largest_size = 0; // seen in this run: a smaller size later means it shrank
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
  // `keys`: the names positions record, one per file of `files`. `range_bytes`: the range size
  // of files split when fewer files than subtasks match (0: never split).
  FileSource(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node, state::FieldNames& names,
             std::vector<std::string> files, std::vector<std::string> keys, std::uint64_t range_bytes)
      : LineSource(spec, node, names), files_(std::move(files)), keys_(std::move(keys)), state_(files_.size()),
        range_bytes_(range_bytes),
        csv_header_(text_format_of(node) == TextFormat::Csv && node.config["header"].value_or(true)) {}

  void open(OperatorContext& ctx) override {
    LineSource::open(ctx);
    parallelism_ = static_cast<std::size_t>(ctx.parallelism);
    // Split only when whole files would leave subtasks idle: dealing whole files reads each
    // once, sequentially, with nothing to count or seek.
    const std::uint64_t bytes = files_.size() < parallelism_ ? range_bytes_ : 0;
    for (auto& f : state_) f.range_bytes = bytes;
  }

  void snapshot_position(std::string& out) const override {
    auto live = current_progress();
    std::vector<FilePositionEntry> listed;
    for (std::size_t k = 0; k < files_.size(); ++k) {
      const FileState& f = state_[k];
      std::map<std::uint64_t, RangeProgress> ranges;
      for (const auto& [r, p] : f.ranges)
        if (owns(k, r)) ranges.emplace(r, p);
      const bool reading = live.has_value() && current_file_ == k;
      if (reading) ranges[current_range_] = RangeProgress{*live, false};
      for (const auto& [r, p] : ranges) {
        const LineProgress& at = p.at;
        if (!(p.done || at.offset > 0 || at.line > 0)) continue; // started nothing
        std::optional<FileIdentity> identity = f.identity;
        // The fingerprint must cover what was consumed (up to its length): a file that was
        // shorter when opened is fingerprinted again over what it has now.
        if (reading && r == current_range_ && identity &&
            identity->fingerprint_bytes < std::min<std::uint64_t>(at.offset, kFingerprintBytes)) {
          auto now = identify_file(current_fd_);
          if (!now) throw Error(ErrorKind::JobFailed, "source '" + ctx_.node->name + "': '" + files_[k] + "': " + now.error());
          identity = *now;
        }
        if (!identity)
          throw Error(ErrorKind::Internal, "source '" + ctx_.node->name + "': no identity for '" + files_[k] + "'");
        listed.push_back(FilePositionEntry{keys_[k], identity, f.range_bytes, r, at.offset, at.line, p.done, at.header});
      }
    }
    write_file_position(out, listed);
  }

  // Which recorded file each matching file is, by identity rather than by name (log
  // rotation renames, replaces and truncates files between runs); see the man page, FILE
  // SOURCE, for the rules in a user's words. Every subtask matches every file (any may own
  // ranges of it); a file's warnings come from the subtask that reads its range 0.
  Result<void> restore_position(const std::vector<std::string_view>& old_subtasks) override {
    recorded_.clear();
    entries_.clear();
    std::set<std::pair<std::string, std::uint64_t>> seen;
    std::map<std::string, std::size_t> by_name; // index in recorded_
    for (std::size_t s = 0; s < old_subtasks.size(); ++s) {
      if (old_subtasks[s].empty()) continue; // that subtask had started nothing
      const std::string what = "position of source '" + ctx_.node->name + "'";
      auto files = read_file_position(old_subtasks[s], what + " subtask " + std::to_string(s));
      if (!files) return Failure{files.error()};
      for (auto& f : *files) {
        if (!seen.insert({f.name, f.range}).second)
          return fail(what + ": file '" + f.name + "'" +
                      (f.range_bytes > 0 ? " range " + std::to_string(f.range) : std::string()) + " recorded twice");
        auto [at, fresh] = by_name.emplace(f.name, recorded_.size());
        if (fresh) {
          recorded_.push_back(f);
        } else {
          // The file's summary: the largest offset read, the longest fingerprint.
          FilePositionEntry& sum = recorded_[at->second];
          if (sum.range_bytes != f.range_bytes)
            return fail(what + ": file '" + f.name + "' recorded with ranges of " + std::to_string(sum.range_bytes) +
                        " and of " + std::to_string(f.range_bytes) + " bytes");
          if (sum.identity.has_value() != f.identity.has_value() ||
              (f.identity && (sum.identity->device != f.identity->device || sum.identity->inode != f.identity->inode)))
            return fail(what + ": file '" + f.name + "' recorded as two different files");
          if (f.identity && f.identity->fingerprint_bytes > sum.identity->fingerprint_bytes) sum.identity = f.identity;
          sum.offset = std::max(sum.offset, f.offset);
        }
        entries_.push_back(std::move(f));
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
    for (std::size_t k = 0; k < files_.size(); ++k) {
      quiet_ = range_owner(k, 0, parallelism_) != static_cast<std::size_t>(ctx_.subtask);
      auto ok = restore_file(k);
      quiet_ = false;
      if (!ok) return ok;
    }
    if (ctx_.subtask == 0) report_gone();
    recorded_.clear();
    entries_.clear();
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
    warn("'" + files_[current_file_] + "' ends in an unterminated line (line " + std::to_string(line) + ", " +
         std::to_string(bytes) + " bytes): left for the next run, which reads it once it ends in a newline");
  }

  // This subtask's ranges, file by file in name order, each file's in order.
  std::optional<Input> open_next_input() override {
    for (; next_file_ < files_.size(); ++next_file_, next_range_ = kNone) {
      const std::size_t k = next_file_;
      const std::size_t subtask = static_cast<std::size_t>(ctx_.subtask);
      if (next_range_ == kNone) next_range_ = (subtask + parallelism_ - k % parallelism_) % parallelism_;
      for (;; next_range_ += parallelism_) {
        const std::uint64_t r = next_range_;
        if (r > 0 && state_[k].range_bytes == 0) break; // read whole, by another subtask
        bool beyond = false;
        auto input = open_range(k, r, beyond);
        if (beyond) break;
        if (input) {
          next_range_ += parallelism_;
          return input;
        }
      }
    }
    return std::nullopt;
  }

  void close_input(int fd, const LineProgress& at) override {
    FileState& f = state_[current_file_];
    std::optional<FileIdentity> identity = f.identity;
    if (identity && identity->fingerprint_bytes < std::min<std::uint64_t>(at.offset, kFingerprintBytes)) {
      auto now = identify_file(fd);
      if (!now) {
        ::close(fd);
        throw Error(ErrorKind::JobFailed, "source '" + ctx_.node->name + "': '" + files_[current_file_] + "': " + now.error());
      }
      identity = *now;
    }
    if (f.range_bytes > 0) check_unchanged(current_file_, fd);
    ::close(fd);
    f.identity = identity;
    f.ranges[current_range_] = RangeProgress{at, true};
    f.known_lines[at.offset] = at.line;
    current_file_ = kNone;
    current_range_ = 0;
    current_fd_ = -1;
  }
  bool blocking_reads() const override { return true; }

private:
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);

  bool owns(std::size_t k, std::uint64_t r) const {
    return range_owner(k, r, parallelism_) == static_cast<std::size_t>(ctx_.subtask);
  }

  [[noreturn]] void failed(std::size_t k, const std::string& why) const {
    throw Error(ErrorKind::JobFailed, "source '" + ctx_.node->name + "': '" + files_[k] + "': " + why);
  }

  // A split file read by several subtasks at once must stay the file they split: one that
  // shrank or was replaced while being read would lose or repeat lines across its ranges.
  void check_unchanged(std::size_t k, int fd) {
    FileState& f = state_[k];
    struct stat st {};
    if (::fstat(fd, &st) != 0) failed(k, std::string("cannot stat it: ") + std::strerror(errno));
    const auto size = static_cast<std::uint64_t>(st.st_size);
    if (f.identity) {
      if (f.identity->device != static_cast<std::uint64_t>(st.st_dev) ||
          f.identity->inode != static_cast<std::uint64_t>(st.st_ino))
        failed(k, "changed while being read in ranges: it is another file now (" +
                      inode_text(f.identity->device, f.identity->inode) + ", now " +
                      inode_text(static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino)) + ")");
      if (size < f.largest_size)
        failed(k, "shrank while being read in ranges (from " + std::to_string(f.largest_size) + " to " +
                      std::to_string(size) + " bytes): it was truncated or rewritten");
      auto first = read_first_bytes(fd);
      if (!first) failed(k, first.error());
      if (!starts_with_fingerprint(*first, *f.identity))
        failed(k, "changed while being read in ranges: its first bytes differ");
    }
    f.largest_size = std::max(f.largest_size, size);
  }

  // Opens range `r` of file `k` positioned where it goes on, or nullopt when it has nothing
  // to read now; sets `beyond` when the file has no range `r` (nor any after it).
  std::optional<Input> open_range(std::size_t k, std::uint64_t r, bool& beyond) {
    FileState& f = state_[k];
    const std::string& path = files_[k];
    const std::uint64_t bytes = f.range_bytes;
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      throw Error(ErrorKind::JobFailed, "source '" + ctx_.node->name + "': cannot open '" + path +
                                            "': " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      ::close(fd);
      failed(k, std::string("cannot stat it: ") + std::strerror(errno));
    }
    const auto size = static_cast<std::uint64_t>(st.st_size);
    const std::uint64_t start = r * bytes;
    const std::uint64_t end = bytes > 0 ? start + bytes : UINT64_MAX;
    auto skip = [&]() -> std::optional<Input> {
      ::close(fd);
      return std::nullopt;
    };
    if (r > 0 && start >= size) {
      beyond = true;
      return skip();
    }
    LineProgress from;
    auto known = f.ranges.find(r);
    if (known != f.ranges.end()) {
      from = known->second.at;
      if (from.offset >= end) return skip(); // read to its end
      // Read to the file's end before: go on only if it has grown since (`run --resume`
      // over growing input).
      if (known->second.done && size <= from.offset) return skip();
    }
    if (bytes > 0 && f.identity) {
      check_unchanged(k, fd);
    } else {
      auto identity = identify_file(fd);
      if (!identity) {
        ::close(fd);
        failed(k, identity.error());
      }
      f.identity = *identity;
      f.largest_size = std::max(f.largest_size, size);
    }
    if (known == f.ranges.end() && r > 0) {
      auto first = first_line_start(fd, start);
      if (!first) failed(k, first.error());
      // No line starts in the range yet: the file's last line, unterminated, started before.
      if (!*first || **first >= end) return skip();
      from.offset = **first;
      auto counted = count_from_known(k, fd, from.offset);
      from.line = counted;
      if (csv_header_) {
        auto header = first_nonblank_line(fd);
        if (!header) failed(k, header.error());
        from.header = *header;
      }
    }
    if (from.offset > 0 && ::lseek(fd, static_cast<off_t>(from.offset), SEEK_SET) < 0) {
      int e = errno;
      ::close(fd);
      throw Error(ErrorKind::JobFailed, "source '" + ctx_.node->name + "': cannot seek in '" + path +
                                            "': " + std::strerror(e));
    }
    ::posix_fadvise(fd, static_cast<off_t>(from.offset), 0, POSIX_FADV_SEQUENTIAL);
    current_file_ = k;
    current_range_ = r;
    current_fd_ = fd;
    return Input{fd, from, end};
  }

  // The line number at line start `offset` of file `k`: newlines counted from the nearest
  // line start before it whose number is known.
  std::uint64_t count_from_known(std::size_t k, int fd, std::uint64_t offset) {
    FileState& f = state_[k];
    auto below = std::prev(f.known_lines.upper_bound(offset));
    auto counted = count_newlines(fd, below->first, offset);
    if (!counted) failed(k, counted.error());
    const std::uint64_t line = below->second + *counted;
    f.known_lines[offset] = line;
    return line;
  }

  // A file whose identity cannot be established is refused (exit 3): reading it from its
  // start might repeat records, and from the recorded offset lose them.
  Failure refuse(std::size_t k, const std::string& why) const {
    return fail("source '" + ctx_.node->name + "': cannot tell which file '" + files_[k] + "' is: " + why);
  }
  void warn(const std::string& message) const {
    if (ctx_.warn && !quiet_) ctx_.warn("source '" + ctx_.node->name + "': " + message);
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

  // Goes on reading file `k` where the snapshot's entries named `e.name` were, with the
  // identity it has now.
  Result<void> resume(std::size_t k, const FilePositionEntry& e) {
    int fd = ::open(files_[k].c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return refuse(k, std::string("cannot open it: ") + std::strerror(errno));
    auto identity = identify_file(fd);
    ::close(fd);
    if (!identity) return refuse(k, identity.error());
    FileState& f = state_[k];
    f.identity = *identity;
    f.range_bytes = e.range_bytes;
    for (const auto& entry : entries_) {
      if (entry.name != e.name) continue;
      f.ranges[entry.range] = RangeProgress{LineProgress{entry.offset, entry.line, entry.header}, entry.done};
      f.known_lines[entry.offset] = entry.line;
    }
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
  std::vector<FileState> state_;  // by file
  std::uint64_t range_bytes_ = 0; // the `range_bytes` key
  bool csv_header_ = false;       // the lines start with a csv header line
  std::size_t parallelism_ = 1;
  std::size_t next_file_ = 0;          // the file of the next range to open
  std::uint64_t next_range_ = kNone;   // ... and that range; kNone: its first of this subtask
  std::size_t current_file_ = kNone;   // file being read
  std::uint64_t current_range_ = 0;    // ... its range
  int current_fd_ = -1;                // ... and its descriptor
  bool hold_unterminated_line_ = false; // the run ends with a savepoint (ends_with_savepoint)
  bool quiet_ = false;                  // restore_position: another subtask warns of this file
  // During restore_position only: what the snapshot recorded (one summary per file: its
  // identity, the largest offset read), its entries (one per range), and what the glob
  // matches now.
  std::vector<FilePositionEntry> recorded_;
  std::vector<FilePositionEntry> entries_;
  std::vector<Present> present_;
};
} // namespace

pipeline::NodeTypeSchema file_source_schema() {
  pipeline::NodeTypeSchema schema{"file", text_format_keys()};
  schema.keys.insert(schema.keys.begin(),
                     pipeline::KeySchema{"path", pipeline::KeyType::String, true, {}, {},
                                         "file or glob, relative to the pipeline file"});
  schema.keys.insert(schema.keys.begin() + 1,
                     pipeline::KeySchema{"range_bytes", pipeline::KeyType::Size, false, {}, {},
                                         "size of the ranges a file is split into when fewer files than "
                                         "subtasks match (0: never split)"});
  schema.keys.insert(schema.keys.begin() + 2,
                     pipeline::KeySchema{"follow", pipeline::KeyType::Bool, false, {}, {},
                                         "tail the files: read what is appended and new files that match, "
                                         "never ending (one subtask)"});
  schema.keys.insert(schema.keys.begin() + 3,
                     pipeline::KeySchema{"poll_interval", pipeline::KeyType::Duration, false, {}, {},
                                         "with follow: how often to look for appended bytes and new files "
                                         "(default 250ms)"});
  schema.one_subtask_if = "follow";
  return schema;
}

std::unique_ptr<Source> make_file_source(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node,
                                         state::FieldNames& names) {
  std::string pattern = node.config["path"].value_or(std::string());
  if (node.config["follow"].value_or(false)) {
    auto interval = kDefaultFollowPollInterval;
    if (auto text = node.config["poll_interval"].value<std::string>()) {
      auto parsed = pipeline::parse_duration_ms(*text);
      if (!parsed || *parsed <= 0)
        throw Error(ErrorKind::Usage, pipeline::position_of(spec, node, "poll_interval") + ": bad poll_interval '" +
                                          *text + "': " + (parsed ? "it must be above 0" : pipeline::duration_help));
      interval = std::chrono::milliseconds(*parsed);
    }
    return make_followed_file_source(spec, node, names, interval);
  }
  auto files = expand_glob(spec.base_dir, pattern);
  if (files.empty())
    throw Error(ErrorKind::Usage, pipeline::position_of(spec, node, "path") + ": source '" + node.name +
                                      "': no file matches '" + pattern + "'");
  for (const auto& f : files)
    if (::access(f.c_str(), R_OK) != 0)
      throw Error(ErrorKind::Usage, pipeline::position_of(spec, node, "path") + ": source '" + node.name +
                                        "': cannot read '" + f + "': " + std::strerror(errno));
  std::vector<std::string> keys;
  for (const auto& f : files) keys.push_back(file_position_key(spec, pattern, f));
  std::uint64_t range_bytes = kDefaultRangeBytes;
  if (auto i = node.config["range_bytes"].value<std::int64_t>()) {
    range_bytes = static_cast<std::uint64_t>(*i);
  } else if (auto text = node.config["range_bytes"].value<std::string>()) {
    auto parsed = pipeline::parse_size_bytes(*text);
    if (!parsed)
      throw Error(ErrorKind::Usage, pipeline::position_of(spec, node, "range_bytes") + ": bad size '" + *text + "'");
    range_bytes = static_cast<std::uint64_t>(*parsed);
  }
  return std::make_unique<FileSource>(spec, node, names, std::move(files), std::move(keys), range_bytes);
}

} // namespace streamctl::operators
