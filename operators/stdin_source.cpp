#include "operators/stdin_source.hpp"

#include <cctype>
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
    // Replay from a copy of the unconsumed tail: the old spool stays as the snapshot saw it.
    spool_ = std::make_unique<Spool>(ctx_.checkpoint_dir, spool_prefix());
    if (auto ok = spool_->copy_tail(ctx_.checkpoint_dir / *name, *offset); !ok)
      return fail(what + ": " + ok.error());
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
    if (!spool_) spool_ = std::make_unique<Spool>(ctx_.checkpoint_dir, spool_prefix());
  }
  std::string spool_prefix() const {
    std::string prefix = "stdin-";
    for (char c : ctx_.node->name)
      prefix += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-') ? c : '_';
    return prefix;
  }

  int in_fd_;
  int reader_fd_ = -1;           // on the spool file
  std::unique_ptr<Spool> spool_; // when spooling
  bool stdin_ended_ = false;
  bool consumed_ = false;        // the input was opened (and maybe read to its end)
  LineProgress start_;           // where reading starts (in the spool after a restore)
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
