#pragma once
// Deletes the spool files (operators/spool.hpp: *.spool, and *.spool.tmp) in
// CHECKPOINT_DIR/NAME/spool that nothing needs any more (a stdout sink's *.pending files
// there are the sink's own business, until the job has drained): without it every checkpointed stdin run left a copy of its whole input
// behind (issue 7, finding 4).
//
// A spool file is needed, and kept, while
// - a completed checkpoint (chk-N with _metadata) or a savepoint under CHECKPOINT_DIR/NAME
//   lists it in a task's `spool_files` (checkpoint_metadata.hpp; savepoints of this version
//   list none: their positions carry the spool bytes they need, spooled_line_source.hpp);
// - the run is live (it may still restart): it belongs to the run (Spool::run_of is the run's
//   tag: an attempt restarted from the beginning reads it again), or the snapshot the run
//   restores from lists it (that snapshot may lie outside the root);
// - it is named as by an older release (PREFIX-<16 hex digits>.spool), whose snapshots did
//   not list their spool files: until a run of the job drains.
// A temporary copy (*.tmp) is never needed: its writer is dead whenever the janitor runs.
// When a run drains (it processed all its input; mark_drained), every file there goes (and
// the *.pending files that sinks of killed attempts left behind): no
// snapshot taken before is resumed from, and a savepoint whose spool file is gone is refused
// at restore (exit 3, naming the file).
//
// The coordinator calls it only when no worker is between restoring and its first
// checkpoint with a file the rules above do not keep: after a checkpoint completes (every
// task restored long before) and when every worker has been reaped.
//
// Not thread-safe: used by the coordinator's thread.

#include <filesystem>
#include <string>
#include <vector>

#include <spdlog/logger.h>

namespace streamctl::runtime {

class SpoolJanitor {
public:
  // `root`: CHECKPOINT_DIR/NAME; `run_tag`: the tag workers of this run spool under (the job
  // id, as passed to them with --run-tag).
  SpoolJanitor(std::filesystem::path root, std::string run_tag, spdlog::logger& log);

  // While the run may still restart: after a checkpoint was pruned, and at a restart.
  // `restore_from`: the snapshot the run (re)starts from, or empty.
  void sweep_live(const std::filesystem::path& restore_from);
  // The run ended without draining (failed, stopped, cancelled) and its workers are gone:
  // what snapshots under the root list, and older releases' files, stay.
  void sweep_ended();
  // The run drained and its workers are gone: every file in the spool directory goes.
  void sweep_drained();

  // The files a sweep would delete now, by name, sorted (for tests and the sweeps).
  enum class Stage { Live, Ended, Drained };
  std::vector<std::string> unneeded(Stage stage, const std::filesystem::path& restore_from = {}) const;

  std::filesystem::path dir() const { return root_ / "spool"; }

private:
  void remove(const std::vector<std::string>& names);

  std::filesystem::path root_;
  std::string run_tag_;
  spdlog::logger& log_;
};

// The list of spool file names in a worker's ACK: one name a line (names hold no newline).
std::string encode_spool_files(const std::vector<std::string>& names);
std::vector<std::string> decode_spool_files(const std::string& text);

} // namespace streamctl::runtime
