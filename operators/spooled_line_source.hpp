#pragma once
// A line source whose input cannot seek (stdin, sockets, a child's output): with checkpoints
// on (OperatorContext::checkpoint_dir set), every byte taken from the input is first
// appended to a spool file there (operators/spool.hpp) and the lines are read back from it,
// so that a restore replays what was read but not emitted, then goes on with the input.
//
// A subclass says how bytes come in (pump_input), and on which descriptor they announce
// themselves (input_readiness_fd). Without checkpoints, a subclass either names a descriptor
// that is read directly (direct_fd: stdin), or its appended bytes go through a pipe inside
// this object, with no file at all.
//
// Position, version 1 (integers little-endian, str = u32 length + bytes):
//
//   u8  version = 1
//   u8  kind      the subclass's letter: 'S' stdin, 'T' tcp, 'Z' zmq, 'X' exec
//   u8  spooled   1 when read through a spool file; 0 when the job had no checkpoint
//                 directory (such a position cannot be restored)
//   str spool     the spool file's name in the checkpoint directory (empty when not spooled)
//   u64 offset    bytes of the spool consumed: records of every line before it were emitted
//   u64 line      lines consumed (bad-record line numbers go on from it)
//   str header    the csv header line consumed, empty when none
//
// Version 2 (a savepoint: snapshot_self_contained_position) is version 1 followed by
//
//   str tail      bytes [offset, end) of the spool file, end being what had been read from
//                 the input when the barrier passed: what the position still needs
//
// so that the savepoint replays without the spool file (moved elsewhere, or the file
// deleted), and names no spool file to keep (referenced_files). Checkpoints stay version 1:
// cheap, they refer to the spool. Both versions are read. The spool runs at most about
// kMaxAhead (16 MiB) ahead of the reader, so the tail stays small.
//
// An empty position means nothing was read yet: it restores as a fresh source.
//
// Which spool file a source reads (Spool::file_name gives the layout; PREFIX is
// "KIND-NODE", e.g. "stdin-in", "tcp-events"):
// - fresh: its run's file PREFIX.RUN.spool, from offset 0. When it exists, an earlier attempt
//   of this run wrote it before it died (the coordinator reaps every worker before it
//   restarts the job), having taken those bytes out of the input: they are read again, and
//   what the input holds now is appended after them.
// - restored from a position in a file of this run: that file, from the position's offset,
//   appending what the input holds now. Appending changes no byte a position points at.
// - restored from a position in another run's file (a savepoint, --resume): a copy of that
//   file's unread tail (taken from the position's `tail` when it has one, else from the
//   file), PREFIX.RUN.ORIGIN.spool, from offset 0, made once per run and
//   position so that every attempt of the run reads the same bytes; the other file is
//   left as it is, for the next restore of the same snapshot.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "operators/line_source.hpp"
#include "operators/spool.hpp"

namespace streamctl::operators {

class SpooledLineSource : public LineSource {
public:
  // `kind` names the type in spool file names ("stdin"); `letter` is the position's kind.
  SpooledLineSource(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node,
                    state::FieldNames& names, std::string kind, char letter);
  ~SpooledLineSource() override;

  SourceStatus poll(state::Batch& out, std::size_t max_records) override;
  int readiness_fd() const override;
  void snapshot_position(std::string& out) const override;
  void snapshot_self_contained_position(std::string& out) const override;
  std::vector<std::string> referenced_files() const override;
  Result<void> restore_position(const std::vector<std::string_view>& old_subtasks) override;

protected:
  // Called at each poll until it returns true: moves what the input has ready, about
  // `budget` bytes at most, by append() or pump_from(), without blocking. Returns true once
  // the input has ended (nothing more will ever be appended). Not called while backlogged().
  virtual bool pump_input(std::size_t budget) = 0;
  // Readable when pump_input would move something; -1 once the input has ended.
  virtual int input_readiness_fd() const = 0;
  // The last pump_input stopped at its budget with more ready that input_readiness_fd may
  // not announce again (an edge-triggered ZMQ_FD): poll again without waiting.
  virtual bool input_has_more() const { return false; }
  // Without checkpoints: a descriptor to read lines from directly instead of pump_input
  // (stdin), or -1 to pump through an internal pipe.
  virtual int direct_fd() const { return -1; }

  // Appends `bytes` (whole lines, each ending in '\n') after what was read so far.
  void append(std::string_view bytes);
  // Moves what `fd` has ready into the spool by Spool::pump (zero-copy from a pipe); true at
  // the end of `fd`. Only while spooling.
  bool pump_from(int fd, std::size_t max_bytes);
  // Without checkpoints, bytes appended wait in memory for the reader to take them: while
  // this holds, stop taking more from the input (the reader catches up at the next poll).
  bool backlogged() const { return pending_.size() >= kMaxPending; }
  bool spooling() const { return !ctx_.checkpoint_dir.empty(); }
  bool input_ended() const { return input_ended_; }

  std::optional<Input> open_next_input() override;
  void close_input(int fd, const LineProgress& at) override;
  bool blocking_reads() const override { return false; }
  // The spool file grows while the input lasts; the internal pipe ends when its writer closes.
  bool input_may_grow() const override { return spooling() && !input_ended_; }

private:
  static constexpr std::size_t kMaxPending = 4 << 20;
  void start_spool();
  void write_position(std::string& out, bool self_contained) const;
  // The spool holds more than kMaxAhead bytes the reader has not read: pump no more for now.
  bool spool_far_ahead() const;
  void flush_pending();
  const std::string& run_tag() const;
  std::string spool_prefix() const;

  std::string kind_;
  char letter_;
  int reader_fd_ = -1;           // on the spool file, or the internal pipe's read end
  int pipe_write_fd_ = -1;       // unspooled: the internal pipe's write end
  std::string pending_;          // unspooled: appended bytes the pipe had no room for yet
  std::unique_ptr<Spool> spool_; // when spooling, once started or restored
  mutable std::string run_tag_;
  bool input_ended_ = false;
  bool consumed_ = false; // the input was opened (and maybe read to its end)
  mutable bool self_contained_ = false; // the last position written carries its spool bytes
  LineProgress start_;    // where reading starts in the spool
  LineProgress final_;    // where it ended
};

} // namespace streamctl::operators
