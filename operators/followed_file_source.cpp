#include "operators/followed_file_source.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

#include "operators/file_position.hpp"
#include "operators/file_source.hpp"
#include "operators/line_source.hpp"
#include "state/error.hpp"

namespace streamctl::operators {
namespace {

using Clock = std::chrono::steady_clock;

// A file being followed.
struct Followed {
  std::string path;       // where it was last seen
  std::string key;        // the name its position entry carries (file_position_key)
  FileIdentity identity;  // fingerprint covering at least what was consumed
  int fd = -1;            // open from discovery until let go
  LineProgress at;        // consumed so far: whole lines
  std::uint64_t seen = 0; // bytes read when last read to the end (a held line included)
  timespec modified{};    // its mtime when last looked at (settled), to notice a rewrite
  int missed = 0;         // scans in a row that did not find it
  bool gone = false;      // missed by two scans: at no matching path any more
  bool final_read = false; // gone and quiet: its last read, after which it is let go
  bool let_go = false;    // closed; removed at the next pass

  bool started() const { return at.offset > 0 || at.line > 0 || !at.header.empty(); }
};

class FollowedFileSource final : public LineSource {
public:
  FollowedFileSource(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node, state::FieldNames& names,
                     std::chrono::milliseconds poll_interval)
      : LineSource(spec, node, names), spec_(spec), pattern_(node.config["path"].value_or(std::string())),
        poll_interval_(poll_interval) {}

  ~FollowedFileSource() override {
    for (auto& f : files_)
      if (f.fd >= 0) ::close(f.fd);
  }

  void open(OperatorContext& ctx) override {
    LineSource::open(ctx);
    scan();
    if (files_.empty()) warn("no file matches '" + pattern_ + "' yet: waiting for one");
  }

  void snapshot_position(std::string& out) const override {
    auto live = current_progress();
    std::vector<FilePositionEntry> listed;
    for (std::size_t k = 0; k < files_.size(); ++k) {
      const Followed& f = files_[k];
      if (f.let_go) continue;
      const bool reading = live.has_value() && current_ == k;
      const LineProgress& at = reading ? *live : f.at;
      if (!(at.offset > 0 || at.line > 0 || !at.header.empty())) continue; // nothing consumed
      FileIdentity identity = f.identity;
      if (identity.fingerprint_bytes < std::min<std::uint64_t>(at.offset, kFingerprintBytes)) {
        auto now = identify_file(f.fd);
        if (!now) failed(f, now.error());
        identity = *now;
      }
      // A file the last scan did not find keeps the name it had, which a new file may hold
      // now; entries of a position have distinct names, and a restore matches files by
      // identity anyway.
      std::string name =
          f.missed > 0 ? f.key + kRotatedAway + std::to_string(f.identity.inode) + ")" : f.key;
      listed.push_back(FilePositionEntry{std::move(name), identity, 0, 0, at.offset, at.line, !reading, at.header});
    }
    write_file_position(out, listed);
  }

  // Each recorded file goes on in the file that is it now: the same device and inode with its
  // first bytes unchanged, else a copy of it (a whole fingerprint alike, and at least as long
  // as what was read). Every other matching file is read from its start.
  Result<void> restore_position(const std::vector<std::string_view>& old_subtasks) override {
    const std::string what = "position of source '" + ctx_.node->name + "'";
    std::vector<FilePositionEntry> entries;
    for (std::size_t s = 0; s < old_subtasks.size(); ++s) {
      if (old_subtasks[s].empty()) continue;
      auto read = read_file_position(old_subtasks[s], what + " subtask " + std::to_string(s));
      if (!read) return Failure{read.error()};
      for (auto& e : *read) {
        if (e.range_bytes > 0)
          return fail(what + ": '" + e.name +
                      "' was read in byte ranges by several subtasks, which a followed file source cannot go on "
                      "from; run it without follow = true to finish that file, or start without the snapshot");
        entries.push_back(std::move(e));
      }
    }
    std::vector<bool> claimed(files_.size(), false);
    for (const auto& e : entries) {
      auto matched = match(e, claimed);
      if (!matched) return Failure{matched.error()};
      if (*matched) claimed[**matched] = true;
    }
    for (std::size_t k = 0; k < files_.size(); ++k) {
      if (claimed[k]) continue;
      for (const auto& e : entries)
        if (e.name == files_[k].key) {
          warn("'" + files_[k].path + "' is not the file the snapshot read there: it was replaced; reading it from "
               "its start");
          break;
        }
    }
    return {};
  }

  std::chrono::milliseconds idle_wait() const override {
    auto left = std::chrono::ceil<std::chrono::milliseconds>(next_pass_at_ - Clock::now());
    return std::clamp(left, std::chrono::milliseconds(1), poll_interval_);
  }

protected:
  // The files with bytes not yet read, one after another; the files let go first, so that a
  // file rotated away is finished before the one that took its name is begun. A pass that read
  // something is followed at once by another; one that found nothing waits for poll_interval.
  std::optional<Input> open_next_input() override {
    for (;;) {
      if (pass_next_ == pass_.size()) {
        const auto now = Clock::now();
        if (!pass_read_ && now < next_pass_at_) return std::nullopt;
        if (now >= next_scan_at_) {
          scan();
          next_scan_at_ = now + poll_interval_;
        }
        begin_pass();
        next_pass_at_ = now + poll_interval_;
        if (pass_.empty()) return std::nullopt;
      }
      const std::size_t k = pass_[pass_next_++];
      if (auto input = open_followed(k)) {
        pass_read_ = true;
        return input;
      }
    }
  }

  bool inputs_may_follow() const override { return true; }

  void close_input(int /*fd*/, const LineProgress& at) override {
    Followed& f = files_[current_];
    f.at = at;
    f.seen = at.offset + held_;
    held_ = 0;
    if (f.identity.fingerprint_bytes < std::min<std::uint64_t>(at.offset, kFingerprintBytes)) {
      auto now = identify_file(f.fd);
      if (!now) failed(f, now.error());
      f.identity = *now;
    }
    if (f.final_read) let_go(f);
    current_ = kNone;
  }

  bool blocking_reads() const override { return true; }
  // A writer may be appending the last line; once a file is let go, its last line is final.
  bool holds_unterminated_line() const override { return current_ == kNone || !files_[current_].final_read; }
  void unterminated_line_held(std::size_t bytes, std::uint64_t /*line*/) override { held_ = bytes; }

private:
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  static constexpr std::size_t kLetGoRemembered = 4096;
  // What a position appends to the name of a file the last scan did not find.
  static constexpr const char* kRotatedAway = " (rotated away, inode ";

  // A file let go, or recorded by the restored snapshot and not found: what was read of it.
  struct LetGo {
    FileIdentity identity;
    LineProgress at;
  };

  [[noreturn]] void failed(const Followed& f, const std::string& why) const {
    throw Error(ErrorKind::JobFailed, "source '" + ctx_.node->name + "': '" + f.path + "': " + why);
  }
  void warn(const std::string& message) const {
    if (ctx_.warn) ctx_.warn("source '" + ctx_.node->name + "': " + message);
  }

  // `remember`: false when another file goes on where it was (a copy of it).
  void let_go(Followed& f, bool remember = true) {
    if (remember) remember_let_go(f.identity, f.at);
    if (f.fd >= 0) ::close(f.fd);
    f.fd = -1;
    f.let_go = true;
  }

  std::optional<std::size_t> find_identity(std::uint64_t device, std::uint64_t inode) const {
    for (std::size_t k = 0; k < files_.size(); ++k)
      if (!files_[k].let_go && files_[k].identity.device == device && files_[k].identity.inode == inode) return k;
    return std::nullopt;
  }

  // Expands `path` again: names files found before under their new names, opens the new ones
  // (read from their start, or from where a file they are a copy of was), and marks the files
  // no longer found as gone.
  void scan() {
    const auto paths = expand_glob(spec_.base_dir, pattern_);
    std::vector<bool> found(files_.size(), false);
    for (const auto& path : paths) {
      struct stat st {};
      if (::stat(path.c_str(), &st) != 0) continue; // gone again since the glob
      if (auto k = find_identity(static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino))) {
        files_[*k].path = path;
        files_[*k].key = file_position_key(spec_, pattern_, path);
        files_[*k].missed = 0;
        files_[*k].gone = false;
        found[*k] = true;
        continue;
      }
      if (auto added = discover(path)) {
        files_.push_back(std::move(*added));
        found.push_back(true);
      }
    }
    // A scan races with renames (the glob lists a directory, then each name is looked at): a
    // file renamed in between is in neither place. Only a file that two scans in a row miss is
    // gone.
    for (std::size_t k = 0; k < found.size(); ++k)
      if (!found[k] && !files_[k].let_go && ++files_[k].missed >= 2) files_[k].gone = true;
  }

  // A file found again after it was let go (or after a restore did not find it) goes on where
  // it was rather than from its start, if it is still that file.
  bool resume_let_go(Followed& f) {
    for (auto it = let_go_.begin(); it != let_go_.end(); ++it) {
      if (it->identity.device != f.identity.device || it->identity.inode != f.identity.inode) continue;
      struct stat st {};
      auto first = read_first_bytes(f.fd);
      if (::fstat(f.fd, &st) != 0 || !first) return false;
      if (static_cast<std::uint64_t>(st.st_size) < it->at.offset || !starts_with_fingerprint(*first, it->identity))
        return false;
      f.at = it->at;
      let_go_.erase(it);
      return true;
    }
    return false;
  }
  void remember_let_go(const FileIdentity& identity, const LineProgress& at) {
    if (at.offset == 0) return;
    if (let_go_.size() == kLetGoRemembered) let_go_.erase(let_go_.begin());
    let_go_.push_back(LetGo{identity, at});
  }

  // A file found at `path` for the first time, open; nullopt when it cannot be read (said once).
  std::optional<Followed> discover(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (unreadable_.insert(path).second) warn("cannot open '" + path + "': " + std::strerror(errno));
      return std::nullopt;
    }
    auto identity = identify_file(fd);
    if (!identity) {
      ::close(fd);
      if (unreadable_.insert(path).second) warn("cannot read '" + path + "': " + identity.error());
      return std::nullopt;
    }
    unreadable_.erase(path);
    Followed f{path, file_position_key(spec_, pattern_, path), *identity, fd, {}, 0, {}, 0, false, false, false};
    if (resume_let_go(f)) return f;
    // A copy of a followed file that was then truncated or rotated away (logrotate's
    // copytruncate, a copy moved over it): it goes on where that file was, which is read from
    // its start again if it is still there, since what it has now is new.
    if (identity->fingerprint_bytes == kFingerprintBytes) {
      for (auto& original : files_) {
        if (original.let_go || !original.started() || original.identity.fingerprint != identity->fingerprint ||
            original.identity.fingerprint_bytes != kFingerprintBytes)
          continue;
        struct stat st {};
        if (::fstat(original.fd, &st) != 0) failed(original, std::string("cannot stat it: ") + std::strerror(errno));
        if (!original.gone && static_cast<std::uint64_t>(st.st_size) >= original.at.offset) continue; // still intact
        struct stat copy {};
        if (::fstat(fd, &copy) != 0 || static_cast<std::uint64_t>(copy.st_size) < original.at.offset) continue;
        warn("'" + path + "' starts as '" + original.path + "' did (" + std::to_string(kFingerprintBytes) +
             " bytes alike) and that file was truncated or rotated away: taking it for a copy, going on at byte " +
             std::to_string(original.at.offset));
        f.at = original.at;
        if (original.gone)
          let_go(original, false);
        else
          forget_read(original);
        break;
      }
    }
    return f;
  }

  void begin_pass() {
    std::erase_if(files_, [](const Followed& f) { return f.let_go; });
    pass_.clear();
    for (std::size_t k = 0; k < files_.size(); ++k)
      if (files_[k].gone) pass_.push_back(k);
    for (std::size_t k = 0; k < files_.size(); ++k)
      if (!files_[k].gone) pass_.push_back(k);
    pass_next_ = 0;
    pass_read_ = false;
  }

  // Positions file `k` where its unread bytes begin, or nullopt when it has none.
  std::optional<Input> open_followed(std::size_t k) {
    Followed& f = files_[k];
    if (f.let_go) return std::nullopt;
    struct stat st {};
    if (::fstat(f.fd, &st) != 0) failed(f, std::string("cannot stat it: ") + std::strerror(errno));
    const auto size = static_cast<std::uint64_t>(st.st_size);
    if (size < f.at.offset) {
      read_again(f, "was truncated (to " + std::to_string(size) + " bytes; " + std::to_string(f.at.offset) +
                        " were read)");
    } else if (size == f.seen && !same_time(st.st_mtim, f.modified) && !still_starts_as_read(f)) {
      // Rewritten since it was read, to the same size (a truncation and as many bytes again).
      read_again(f, "was rewritten in place (its first bytes changed)");
    } else if (size == f.seen) {
      f.modified = settled(st.st_mtim);
      if (!f.gone) return std::nullopt;
      // Gone and quiet: read its last unterminated line, if any, and let it go.
      if (size == f.at.offset || f.final_read) {
        let_go(f);
        return std::nullopt;
      }
      f.final_read = true;
    } else if (f.started() && !still_starts_as_read(f)) {
      read_again(f, "was rewritten in place (its first bytes changed)");
    }
    f.modified = settled(st.st_mtim);
    if (::lseek(f.fd, static_cast<off_t>(f.at.offset), SEEK_SET) < 0)
      failed(f, std::string("cannot seek in it: ") + std::strerror(errno));
    current_ = k;
    return Input{f.fd, f.at, UINT64_MAX};
  }

  // Whether `f` starts with the bytes `id` fingerprinted.
  bool starts_as(const Followed& f, const FileIdentity& id) const {
    auto first = read_first_bytes(f.fd);
    if (!first) failed(f, first.error());
    return starts_with_fingerprint(*first, id);
  }
  bool still_starts_as_read(const Followed& f) const { return starts_as(f, f.identity); }
  static bool same_time(const timespec& a, const timespec& b) { return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec; }
  // A file's mtime, or zero (never equal to one) while it is too recent to tell two writes
  // apart: the kernel stamps files from a coarse clock, so a rewrite a few milliseconds after
  // the last write may leave the mtime as it was; the first bytes are then looked at again.
  static timespec settled(const timespec& mtime) {
    timespec now{};
    ::clock_gettime(CLOCK_REALTIME, &now);
    const auto ns = [](const timespec& t) { return std::int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec; };
    return ns(now) - ns(mtime) > 50'000'000 ? mtime : timespec{};
  }

  // What was read of `f` is not in it any more: everything in it now is new.
  void read_again(Followed& f, const std::string& why) {
    warn("'" + f.path + "' " + why + ": reading it again from its start");
    forget_read(f);
  }
  void forget_read(Followed& f) {
    f.at = {};
    f.seen = 0;
    auto identity = identify_file(f.fd);
    if (!identity) failed(f, identity.error());
    f.identity = *identity;
  }

  // The file that recorded entry `e` goes on in, if any (with its progress set), or a
  // refusal when a file might or might not be it.
  Result<std::optional<std::size_t>> match(const FilePositionEntry& e, const std::vector<bool>& claimed) {
    auto size_of = [&](const Followed& f) -> std::uint64_t {
      struct stat st {};
      if (::fstat(f.fd, &st) != 0) failed(f, std::string("cannot stat it: ") + std::strerror(errno));
      return static_cast<std::uint64_t>(st.st_size);
    };
    auto go_on = [&](std::size_t k) -> std::optional<std::size_t> {
      files_[k].at = LineProgress{e.offset, e.line, e.header};
      return k;
    };
    if (!e.identity) {
      // A version 1 position (no identities): the file at the name is taken for the one read.
      for (std::size_t k = 0; k < files_.size(); ++k)
        if (!claimed[k] && files_[k].key == e.name) {
          if (size_of(files_[k]) < e.offset)
            return fail("source '" + ctx_.node->name + "': '" + files_[k].path + "' has fewer bytes than the " +
                        std::to_string(e.offset) + " already read: it was truncated or replaced since the snapshot");
          return go_on(k);
        }
      if (e.offset > 0) gone(e);
      return std::optional<std::size_t>{};
    }
    const FileIdentity& id = *e.identity;
    for (std::size_t k = 0; k < files_.size(); ++k) {
      const Followed& f = files_[k];
      if (claimed[k] || f.identity.device != id.device || f.identity.inode != id.inode) continue;
      if (size_of(f) >= e.offset && starts_as(f, id)) {
        if (e.name != f.key && e.name.find(kRotatedAway) == std::string::npos)
          warn("'" + f.path + "' is '" + e.name + "' of the snapshot, renamed since: going on at byte " +
               std::to_string(e.offset));
        return go_on(k);
      }
      warn("'" + f.path + "' was truncated or rewritten in place since the snapshot (" + std::to_string(e.offset) +
           " bytes were read): reading it from its start");
      return std::optional<std::size_t>{k};
    }
    if (e.offset > 0) {
      for (std::size_t k = 0; k < files_.size(); ++k) {
        const Followed& f = files_[k];
        if (claimed[k] || size_of(f) < e.offset || !starts_as(f, id)) continue;
        if (id.fingerprint_bytes < kFingerprintBytes)
          return fail("source '" + ctx_.node->name + "': cannot tell which file '" + f.path + "' is: it is not the file '" +
                      e.name + "' the snapshot read but starts with the same " + std::to_string(id.fingerprint_bytes) +
                      " bytes, too few to tell a copy of it from a new file that starts alike; move it out of the "
                      "source's path, or start without the snapshot to read everything again");
        warn("'" + f.path + "' is not the file '" + e.name + "' the snapshot read but starts with the same " +
             std::to_string(kFingerprintBytes) + " bytes: taking it for a copy of it, going on at byte " +
             std::to_string(e.offset));
        return go_on(k);
      }
      gone(e);
      remember_let_go(id, LineProgress{e.offset, e.line, e.header});
    }
    return std::optional<std::size_t>{};
  }

  void gone(const FilePositionEntry& e) const {
    warn("'" + e.name + "' of the snapshot no longer matches path (rotated away or deleted): lines added to it after "
         "byte " + std::to_string(e.offset) + " are not read");
  }

  const pipeline::PipelineSpec& spec_;
  std::string pattern_;
  std::chrono::milliseconds poll_interval_;
  std::vector<Followed> files_;      // in the order found
  std::set<std::string> unreadable_; // paths whose failure to open was said
  std::vector<LetGo> let_go_;        // the last kLetGoRemembered, oldest first
  std::vector<std::size_t> pass_;    // the files of this pass, by index in files_
  std::size_t pass_next_ = 0;
  bool pass_read_ = false;           // the pass opened a file with bytes to read
  Clock::time_point next_pass_at_{};
  Clock::time_point next_scan_at_{};
  std::size_t current_ = kNone; // the file being read
  std::size_t held_ = 0;        // bytes of an unterminated line held at its end
};

} // namespace

std::unique_ptr<Source> make_followed_file_source(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node,
                                                  state::FieldNames& names, std::chrono::milliseconds poll_interval) {
  return std::make_unique<FollowedFileSource>(spec, node, names, poll_interval);
}

} // namespace streamctl::operators
