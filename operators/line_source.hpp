#pragma once
// What the stdin and file sources share: lines from file descriptors, decoded per `format`,
// bad lines handed to `on_error` with their line number.
//
// Each input gets its own decoder, so that every csv file of a glob has its header line read
// as a header. For rewinding, the source can ask where the current input is (bytes and lines
// consumed, always whole lines, and the csv header line read so far), and an input can be
// opened part-way with that progress.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "operators/line_reader.hpp"
#include "operators/operator.hpp"
#include "operators/text_format.hpp"

namespace streamctl::operators {

// How far an input has been read: `offset` bytes (the end of a line), `line` lines (blank ones
// included), and the csv header line when one has been consumed (empty otherwise), which a
// reader resuming at `offset` must be told again.
struct LineProgress {
  std::uint64_t offset = 0;
  std::uint64_t line = 0;
  std::string header;
};

class LineSource : public Source {
public:
  LineSource(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node, state::FieldNames& names);
  SourceStatus poll(state::Batch& out, std::size_t max_records) override;
  int readiness_fd() const override { return fd_; }
  std::span<const RecordOrigin> last_poll_origins() const override { return origins_; }

protected:
  struct Input {
    int fd = -1;           // positioned at `from.offset`
    LineProgress from;     // where a restored input resumes; zero for a fresh one
    // The input is the lines that start before byte `end` (a range of a file, file_ranges.hpp):
    // the line that straddles it is read whole, and the input ends there.
    std::uint64_t end = UINT64_MAX;
  };
  // Opens the next input, or returns nullopt when there is none now: the source ends then,
  // unless inputs_may_follow().
  virtual std::optional<Input> open_next_input() = 0;
  // Whether an input may still come after open_next_input() found none (a followed file that
  // grows, a new file matching the glob): poll() reports Idle then, not End.
  virtual bool inputs_may_follow() const { return false; }
  // Called when the current input is exhausted (close it); `at` is its final progress.
  virtual void close_input(int fd, const LineProgress& at) = 0;
  // Whether reads may block (false for stdin, which may be a terminal or a slow pipe).
  virtual bool blocking_reads() const = 0;
  // Whether the current input may still grow, so that reading zero bytes is not its end (a
  // spool file that stdin is being copied into).
  virtual bool input_may_grow() const { return false; }
  // Whether an unterminated last line of an input is left unconsumed at its end instead of
  // being read as a record (a file that a writer may still be appending to, in a run that
  // ends with a savepoint: the next run reads the line once it is complete).
  virtual bool holds_unterminated_line() const { return false; }
  // The current input ended in an unterminated line of `bytes` bytes, line number `line`,
  // that was held back (before close_input).
  virtual void unterminated_line_held(std::size_t /*bytes*/, std::uint64_t /*line*/) {}

  // The progress of the input being read, or nullopt between inputs.
  std::optional<LineProgress> current_progress() const;

private:
  const pipeline::PipelineSpec& spec_;
  const pipeline::NodeSpec& node_;
  state::FieldNames& names_;
  std::optional<LineDecoder> decoder_;
  std::optional<LineReader> reader_;
  std::string header_; // the csv header line of the current input, once read
  int fd_ = -1;
  std::uint64_t end_ = UINT64_MAX; // of the current input
  bool done_ = false;
  std::vector<RecordOrigin> origins_; // of the records the last poll appended
};

} // namespace streamctl::operators
