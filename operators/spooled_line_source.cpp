#include "operators/spooled_line_source.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <random>
#include <unistd.h>

#include "operators/source_position.hpp"

namespace streamctl::operators {

namespace {
// Version 1: periodic checkpoints (and savepoints of older releases); version 2, the same
// followed by the unread spool bytes: savepoints.
constexpr std::uint8_t kPositionVersion = 1;
constexpr std::uint8_t kSelfContainedVersion = 2;

// Bytes moved from the input to the spool per poll at most, so a fast producer cannot keep a
// poll from returning.
constexpr std::size_t kPumpBytes = 4 << 20;
// Bytes the spool may hold beyond what the reader has read before the input is left to wait
// (in its pipe, socket or child): a savepoint copies the unread bytes into its position, in
// memory, so they must stay few however fast the input comes and slowly records go.
constexpr std::uint64_t kMaxAhead = 16 << 20;

// Names a position in another run's spool file (FNV-1a of its name and offset): the copy of
// its tail that this run reads.
std::string origin_of(const std::string& name, std::uint64_t offset) {
  std::uint64_t h = 14695981039346656037ull;
  auto mix = [&h](unsigned char c) { h = (h ^ c) * 1099511628211ull; };
  for (char c : name)
    mix(static_cast<unsigned char>(c));
  for (int k = 0; k < 8; ++k)
    mix(static_cast<unsigned char>(offset >> (8 * k)));
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}
} // namespace

SpooledLineSource::SpooledLineSource(const pipeline::PipelineSpec& spec,
                                     const pipeline::NodeSpec& node, state::FieldNames& names,
                                     std::string kind, char letter)
    : LineSource(spec, node, names), kind_(std::move(kind)), letter_(letter) {}

SpooledLineSource::~SpooledLineSource() {
  if (reader_fd_ >= 0) ::close(reader_fd_);
  if (pipe_write_fd_ >= 0) ::close(pipe_write_fd_);
}

SourceStatus SpooledLineSource::poll(state::Batch& out, std::size_t max_records) {
  if (!spooling() && direct_fd() >= 0) return LineSource::poll(out, max_records);
  if (spooling()) {
    start_spool();
  } else if (reader_fd_ < 0 && !consumed_) {
    int ends[2];
    if (::pipe2(ends, O_CLOEXEC | O_NONBLOCK) != 0)
      throw Error(ErrorKind::JobFailed,
                  "source '" + ctx_.node->name + "': pipe: " + std::strerror(errno));
    (void)::fcntl(ends[1], F_SETPIPE_SZ, 1 << 20); // fewer round trips; the default also works
    reader_fd_ = ends[0];
    pipe_write_fd_ = ends[1];
  }
  flush_pending();
  if (!input_ended_ && !backlogged() && !spool_far_ahead() && pump_input(kPumpBytes)) input_ended_ = true;
  flush_pending();
  auto status = LineSource::poll(out, max_records);
  // The pipe was drained but bytes still wait for room in it: there is more right away.
  if (status == SourceStatus::Idle && (!pending_.empty() || (!input_ended_ && input_has_more())))
    return SourceStatus::Data;
  return status;
}

int SpooledLineSource::readiness_fd() const {
  if (!spooling() && direct_fd() >= 0) return LineSource::readiness_fd();
  return input_ended_ ? -1 : input_readiness_fd();
}

void SpooledLineSource::append(std::string_view bytes) {
  if (spooling()) {
    spool_->append(bytes);
    return;
  }
  pending_.append(bytes);
}

bool SpooledLineSource::pump_from(int fd, std::size_t max_bytes) {
  return spool_->pump(fd, max_bytes) == Spool::Pump::End;
}

void SpooledLineSource::flush_pending() {
  if (pipe_write_fd_ < 0) return;
  std::size_t done = 0;
  while (done < pending_.size()) {
    ssize_t n = ::write(pipe_write_fd_, pending_.data() + done, pending_.size() - done);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    throw Error(ErrorKind::JobFailed,
                "source '" + ctx_.node->name + "': pipe write: " + std::strerror(errno));
  }
  pending_.erase(0, done);
  // The reader sees the end of the input once it has read everything before it.
  if (input_ended_ && pending_.empty()) {
    ::close(pipe_write_fd_);
    pipe_write_fd_ = -1;
  }
}

bool SpooledLineSource::spool_far_ahead() const {
  if (!spool_ || reader_fd_ < 0) return false;
  off_t read = ::lseek(reader_fd_, 0, SEEK_CUR);
  return read >= 0 && spool_->size() > static_cast<std::uint64_t>(read) + kMaxAhead;
}

void SpooledLineSource::write_position(std::string& out, bool self_contained) const {
  self_contained_ = false;
  if (spooling() && !spool_) return; // nothing read: restores as a fresh source
  auto live = current_progress();
  const LineProgress& at = live ? *live : consumed_ ? final_ : start_;
  if (spool_) spool_->sync();
  self_contained_ = self_contained && spool_ != nullptr;
  PositionWriter w(out, self_contained_ ? kSelfContainedVersion : kPositionVersion, static_cast<std::uint8_t>(letter_));
  w.u8(spool_ ? 1 : 0);
  w.str(spool_ ? spool_->name() : std::string());
  w.u64(at.offset);
  w.u64(at.line);
  w.str(at.header);
  // Why in the position, not a file beside the snapshot: the snapshot file is already
  // checksummed (a damaged copy is refused, exit 3), sent to the coordinator with storage =
  // "coordinator", checked by `snapshot verify` and moved with its directory; _metadata and
  // older readers need no change. The bytes are few (kMaxAhead, plus the line in hand).
  if (self_contained_) w.str(spool_->read_from(at.offset));
}

void SpooledLineSource::snapshot_position(std::string& out) const { write_position(out, false); }

void SpooledLineSource::snapshot_self_contained_position(std::string& out) const { write_position(out, true); }

std::vector<std::string> SpooledLineSource::referenced_files() const {
  if (!spool_ || self_contained_) return {};
  return {spool_->name()};
}

Result<void>
SpooledLineSource::restore_position(const std::vector<std::string_view>& old_subtasks) {
  std::string what = "position of source '" + ctx_.node->name + "'";
  if (old_subtasks.size() != 1)
    return fail(what + ": " + kind_ + " has one subtask, the snapshot holds " +
                std::to_string(old_subtasks.size()));
  if (old_subtasks[0].empty()) return {}; // nothing was read
  PositionReader r(old_subtasks[0], what);
  auto version = r.header(kPositionVersion, kSelfContainedVersion, static_cast<std::uint8_t>(letter_));
  if (!version) return Failure{version.error()};
  auto spooled = r.u8();
  if (!spooled) return Failure{spooled.error()};
  auto name = r.str(4096);
  if (!name) return Failure{name.error()};
  auto offset = r.u64();
  if (!offset) return Failure{offset.error()};
  auto line = r.u64();
  if (!line) return Failure{line.error()};
  auto header = r.str();
  if (!header) return Failure{header.error()};
  std::optional<std::string> tail; // version 2: bytes [offset, end) of the spool, copied
  if (*version == kSelfContainedVersion) {
    auto bytes = r.str(r.remaining());
    if (!bytes) return Failure{bytes.error()};
    tail = std::move(*bytes);
  }
  if (auto ok = r.end(); !ok) return ok;
  if (*spooled > 1) return r.failure("bad spooled flag");
  if (*spooled == 0)
    return fail(what + ": " + kind_ +
                " was read without a checkpoint directory, so it cannot be replayed");
  if (!Spool::valid_name(*name)) return r.failure("bad spool file name '" + *name + "'");
  if (*line > *offset) return r.failure("more lines than bytes");
  if (ctx_.checkpoint_dir.empty())
    return fail(what + ": no checkpoint directory to find spool file '" + *name + "' in");
  const std::filesystem::path& dir = ctx_.checkpoint_dir;
  std::error_code ec;
  // This run's own file goes on past the snapshot (what was read after it), so it is read even
  // when the position has a copy; the copy serves another run, or this run's file deleted.
  bool own_file = Spool::run_of(*name) == run_tag();
  if (own_file && (!tail || std::filesystem::exists(dir / *name, ec))) {
    if (!std::filesystem::exists(dir / *name, ec))
      return fail(what + ": spool file '" + (dir / *name).string() + "' is missing");
    spool_ = Spool::open(dir, *name);
    if (spool_->size() < *offset)
      return fail(what + ": spool file '" + spool_->path().string() + "' has " +
                  std::to_string(spool_->size()) + " bytes, fewer than the " +
                  std::to_string(*offset) + " already read");
    start_ = LineProgress{*offset, *line, std::move(*header)};
    return {};
  }
  std::string copy = Spool::file_name(spool_prefix(), run_tag(), origin_of(*name, *offset));
  if (std::filesystem::exists(dir / copy, ec)) {
    spool_ = Spool::open(dir, copy);
  } else if (tail) {
    auto created = Spool::create_from_bytes(dir, copy, *tail);
    if (!created) return fail(what + ": " + created.error());
    spool_ = std::move(*created);
  } else {
    auto created = Spool::create_from_tail(dir, copy, dir / *name, *offset);
    if (!created) return fail(what + ": " + created.error());
    spool_ = std::move(*created);
  }
  start_ = LineProgress{0, *line, std::move(*header)};
  return {};
}

std::optional<LineSource::Input> SpooledLineSource::open_next_input() {
  if (consumed_) return std::nullopt;
  consumed_ = true;
  if (!spooling()) return Input{direct_fd() >= 0 ? direct_fd() : reader_fd_, start_};
  start_spool();
  reader_fd_ = spool_->open_reader();
  if (start_.offset > 0 && ::lseek(reader_fd_, static_cast<off_t>(start_.offset), SEEK_SET) < 0)
    throw Error(ErrorKind::JobFailed, "spool: cannot seek in '" + spool_->path().string() + "'");
  return Input{reader_fd_, start_};
}

void SpooledLineSource::close_input(int fd, const LineProgress& at) {
  final_ = at;
  if (fd == reader_fd_) {
    ::close(reader_fd_);
    reader_fd_ = -1;
  }
}

void SpooledLineSource::start_spool() {
  if (!spool_)
    spool_ = Spool::open(ctx_.checkpoint_dir, Spool::file_name(spool_prefix(), run_tag()));
}

std::string SpooledLineSource::spool_prefix() const {
  return kind_ + "-" + Spool::safe_part(ctx_.node->name);
}

// The run's tag; without one (a test), a random one: this object is a run of its own.
const std::string& SpooledLineSource::run_tag() const {
  if (run_tag_.empty()) {
    if (!ctx_.run_tag.empty()) {
      run_tag_ = Spool::safe_part(ctx_.run_tag);
    } else {
      std::random_device random;
      char hex[17];
      std::snprintf(hex, sizeof hex, "%08x%08x", random(), random());
      run_tag_ = hex;
    }
  }
  return run_tag_;
}

} // namespace streamctl::operators
