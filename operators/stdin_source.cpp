#include "operators/stdin_source.hpp"

#include <cstdio>
#include <random>
#include <unistd.h>

#include "operators/line_source.hpp"
#include "operators/source_position.hpp"
#include "operators/spool.hpp"
#include "operators/text_format_schema.hpp"

namespace streamctl::operators {

namespace {

// Position of the stdin source, version 1 (integers little-endian, str = u32 length + bytes):
//
//   u8  version = 1
//   u8  kind = 'S'
//   u8  spooled   1 when read through a spool file; 0 when the job had no checkpoint
//                 directory (such a position cannot be restored)
//   str spool     the spool file's name in the checkpoint directory (empty when not spooled)
//   u64 offset    bytes of the spool consumed: records of every line before it were emitted
//   u64 line      lines consumed (bad-record line numbers go on from it)
//   str header    the csv header line consumed, empty when none
//
// An empty position means nothing was read yet: it restores as a fresh source.
//
// Which spool file a source reads (Spool::file_name gives the layout):
// - fresh: its run's file PREFIX.RUN.spool, from offset 0. When it exists, an earlier attempt
//   of this run wrote it before it died (the coordinator reaps every worker before it
//   restarts the job), having taken those bytes out of stdin: they are read again, and what
//   stdin holds now is appended after them.
// - restored from a position in a file of this run: that file, from the position's offset,
//   appending what stdin holds now. Appending changes no byte a position points at.
// - restored from a position in another run's file (a savepoint, --resume): a copy of that
//   file's unread tail, PREFIX.RUN.ORIGIN.spool, from offset 0, made once per run and
//   position so that every attempt of the run reads the same bytes; the other file is
//   left as it is, for the next restore of the same snapshot.
constexpr std::uint8_t kStdinPositionVersion = 1;

// Bytes moved from stdin to the spool per poll at most, so a fast producer cannot keep a poll
// from returning.
constexpr std::size_t kPumpBytes = 4 << 20;

class StdinSource final : public LineSource {
public:
  StdinSource(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node, state::FieldNames& names,
              int fd)
      : LineSource(spec, node, names), in_fd_(fd) {}

  ~StdinSource() override {
    if (reader_fd_ >= 0) ::close(reader_fd_);
  }

  SourceStatus poll(state::Batch& out, std::size_t max_records) override {
    if (spooling()) {
      start_spool();
      if (!stdin_ended_ && spool_->pump(in_fd_, kPumpBytes) == Spool::Pump::End) stdin_ended_ = true;
    }
    return LineSource::poll(out, max_records);
  }

  int readiness_fd() const override {
    if (!spooling()) return LineSource::readiness_fd();
    return stdin_ended_ ? -1 : in_fd_;
  }

  void snapshot_position(std::string& out) const override {
    if (spooling() && !spool_) return; // nothing read: restores as a fresh source
    auto live = current_progress();
    const LineProgress& at = live ? *live : consumed_ ? final_ : start_;
    if (spool_) spool_->sync();
    PositionWriter w(out, kStdinPositionVersion, 'S');
    w.u8(spool_ ? 1 : 0);
    w.str(spool_ ? spool_->name() : std::string());
    w.u64(at.offset);
    w.u64(at.line);
    w.str(at.header);
  }

  std::vector<std::string> referenced_files() const override {
    if (!spool_) return {};
    return {spool_->name()};
  }

  Result<void> restore_position(const std::vector<std::string_view>& old_subtasks) override {
    std::string what = "position of source '" + ctx_.node->name + "'";
    if (old_subtasks.size() != 1)
      return fail(what + ": stdin has one subtask, the snapshot holds " + std::to_string(old_subtasks.size()));
    if (old_subtasks[0].empty()) return {}; // nothing was read
    PositionReader r(old_subtasks[0], what);
    if (auto ok = r.header(kStdinPositionVersion, 'S'); !ok) return ok;
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
    if (auto ok = r.end(); !ok) return ok;
    if (*spooled > 1) return r.failure("bad spooled flag");
    if (*spooled == 0)
      return fail(what + ": stdin was read without a checkpoint directory, so it cannot be replayed");
    if (!Spool::valid_name(*name)) return r.failure("bad spool file name '" + *name + "'");
    if (*line > *offset) return r.failure("more lines than bytes");
    if (ctx_.checkpoint_dir.empty())
      return fail(what + ": no checkpoint directory to find spool file '" + *name + "' in");
    const std::filesystem::path& dir = ctx_.checkpoint_dir;
    std::error_code ec;
    if (Spool::run_of(*name) == run_tag()) {
      if (!std::filesystem::exists(dir / *name, ec))
        return fail(what + ": spool file '" + (dir / *name).string() + "' is missing");
      spool_ = Spool::open(dir, *name);
      if (spool_->size() < *offset)
        return fail(what + ": spool file '" + spool_->path().string() + "' has " + std::to_string(spool_->size()) +
                    " bytes, fewer than the " + std::to_string(*offset) + " already read");
      start_ = LineProgress{*offset, *line, std::move(*header)};
      return {};
    }
    std::string copy = Spool::file_name(spool_prefix(), run_tag(), origin_of(*name, *offset));
    if (std::filesystem::exists(dir / copy, ec)) {
      spool_ = Spool::open(dir, copy);
    } else {
      auto created = Spool::create_from_tail(dir, copy, dir / *name, *offset);
      if (!created) return fail(what + ": " + created.error());
      spool_ = std::move(*created);
    }
    start_ = LineProgress{0, *line, std::move(*header)};
    return {};
  }

protected:
  std::optional<Input> open_next_input() override {
    if (consumed_) return std::nullopt;
    consumed_ = true;
    if (!spooling()) return Input{in_fd_, start_};
    start_spool();
    reader_fd_ = spool_->open_reader();
    if (start_.offset > 0 && ::lseek(reader_fd_, static_cast<off_t>(start_.offset), SEEK_SET) < 0)
      throw Error(ErrorKind::JobFailed, "spool: cannot seek in '" + spool_->path().string() + "'");
    return Input{reader_fd_, start_};
  }
  void close_input(int fd, const LineProgress& at) override {
    final_ = at;
    if (fd == reader_fd_) {
      ::close(reader_fd_);
      reader_fd_ = -1;
    }
  }
  bool blocking_reads() const override { return false; }
  bool input_may_grow() const override { return spooling() && !stdin_ended_; }

private:
  bool spooling() const { return !ctx_.checkpoint_dir.empty(); }
  void start_spool() {
    if (!spool_) spool_ = Spool::open(ctx_.checkpoint_dir, Spool::file_name(spool_prefix(), run_tag()));
  }
  std::string spool_prefix() const { return "stdin-" + Spool::safe_part(ctx_.node->name); }
  // The run's tag; without one (a test), a random one: this object is a run of its own.
  const std::string& run_tag() const {
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
  // Names a position in another run's spool file (FNV-1a of its name and offset): the copy of
  // its tail that this run reads.
  static std::string origin_of(const std::string& name, std::uint64_t offset) {
    std::uint64_t h = 14695981039346656037ull;
    auto mix = [&h](unsigned char c) { h = (h ^ c) * 1099511628211ull; };
    for (char c : name) mix(static_cast<unsigned char>(c));
    for (int k = 0; k < 8; ++k) mix(static_cast<unsigned char>(offset >> (8 * k)));
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
    return hex;
  }

  int in_fd_;
  int reader_fd_ = -1;           // on the spool file
  std::unique_ptr<Spool> spool_; // when spooling, once started or restored
  mutable std::string run_tag_;
  bool stdin_ended_ = false;
  bool consumed_ = false;        // the input was opened (and maybe read to its end)
  LineProgress start_;           // where reading starts in the spool
  LineProgress final_;           // where it ended
};
} // namespace

pipeline::NodeTypeSchema stdin_source_schema() {
  pipeline::NodeTypeSchema schema{"stdin", text_format_keys()};
  schema.single_instance = true;
  return schema;
}

std::unique_ptr<Source> make_stdin_source(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node,
                                          state::FieldNames& names) {
  return make_stdin_source_reading(STDIN_FILENO, spec, node, names);
}

std::unique_ptr<Source> make_stdin_source_reading(int fd, const pipeline::PipelineSpec& spec,
                                                  const pipeline::NodeSpec& node, state::FieldNames& names) {
  return std::make_unique<StdinSource>(spec, node, names, fd);
}

} // namespace streamctl::operators
