#pragma once
// Where checkpoints live, and the _metadata file that completes one (SPEC §10):
//
//   CHECKPOINT_DIR/NAME/chk-N/           one snapshot file per task, then _metadata
//   CHECKPOINT_DIR/NAME/savepoint-TIME/  the same layout, kept until a person deletes it
//   CHECKPOINT_DIR/NAME/spool/           what sources that cannot seek (stdin) have read
//   CHECKPOINT_DIR/NAME/lock             held (flock) by the coordinator of the running job
//   CHECKPOINT_DIR/NAME/drained          "checkpoint N at EPOCH_MS": a run drained when the
//                                        largest id was N; snapshots up to N are not resumed from
//   CHECKPOINT_DIR/NAME/restored         a run started from a snapshot (mark_restored): until
//                                        a newer one completes here, that is what to resume
//
// _metadata is TOML, so that a person can read it (`cat`), written last and atomically
// (state/durable_file.hpp): a directory without it is an incomplete checkpoint and is never
// restored. Version 2 (what this streamctl writes):
//
//   # streamctl checkpoint metadata: written last; its presence completes the checkpoint.
//   chains = 2                          # number of chains in the plan that wrote it
//   checkpoint_id = 7
//   created_at = 1796000000000          # epoch ms
//   format = "streamctl-checkpoint"
//   job_id = "page-views-20261129-101500-1a2b"
//   job_name = "page-views"
//   kind = "checkpoint"                 # or "savepoint"
//   max_parallelism = 128
//   version = 2
//   [[tasks]]                           # one per task (subtask of a fused chain)
//   bytes = 1234                        # the size of the file
//   file = "chain-0-subtask-1.snap"     # relative: a savepoint can be moved as a directory
//   nodes = ["clicks", "ok"]            # the chain, head first
//   parallelism = 2
//   spool_files = ["stdin-in.JOB.spool"] # optional: files in CHECKPOINT_DIR/NAME/spool that
//                                       # the task's source position needs (absent: none)
//   counts = "ok:10:7:0:0:0"            # optional: the task's record counters at the barrier
//                                       # (job_metrics.hpp); metrics only, never checked
//   subtask = 1
//   previous = ["../chk-5/chain-0-subtask-1.snap", "../chk-6/chain-0-subtask-1.snap"]
//   previous_bytes = [1200, 340]        # version 3 only, optional (incremental checkpoints):
//                                       # the files of earlier checkpoints of the same task
//                                       # this one builds on, oldest first; `file` is the newest
//   ...
//   checksum = "0123456789abcdef"       # last line: XXH64 (seed 0, 16 lowercase hex digits)
//                                       # of every byte of the file before this line
//
// The checksum line is not part of the TOML document (the bytes before it are): a byte
// flipped where TOML still parses (a digit of `bytes`, a letter of a name) is found by it.
// Version 1 (tests/data/savepoints/golden-v1) has no `chains` and no checksum line; it is
// still read, with every check below but those two. A checksum line is verified whenever it
// is present; a version-2 file without one is refused.
//
// What a reader accepts (read_metadata; checkpoint_completeness.hpp): the fields above with
// their types; kind checkpoint|savepoint; 1 <= parallelism <= max_parallelism; 0 <= subtask <
// parallelism (64-bit, never wrapped); a file name with no '/' not starting with '.'; no file
// named twice. Tasks with the same `nodes` are one chain: the same parallelism in each entry,
// every subtask 0..parallelism-1 exactly once; no node in two chains; `chains` chains.
// CheckpointRestore::open then checks each file against its entry (its size is `bytes`, its
// header says the same chain, subtask, parallelism, checkpoint) and that the chains' ids in the
// headers are 0..chains-1, one per chain.
//
// Paths are relative to the directory, so a savepoint is relocatable.
//
// Version 3 is version 2 with `previous` in some task: an incremental checkpoint
// (incremental_checkpoints.hpp). A task's state is then its `previous` files and its `file`,
// read as one: a key group's keyed segment in a newer file replaces the older ones (an empty
// segment: the group holds nothing now), and the other segments come from `file` alone.
// Each `previous` entry is "../chk-N/" and a task file name, N below this checkpoint's id and
// rising along the list; a savepoint has none (it is self-contained). The files stay where the
// earlier checkpoint wrote them: prune_checkpoints deletes a checkpoint's directory only once
// no retained checkpoint names a file in it. A reader of version 2 refuses version 3, which it
// would otherwise read as if `file` held everything.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/spec/pipeline_spec.hpp"
#include "state/error.hpp"

namespace streamctl::runtime {

inline constexpr const char* kMetadataFile = "_metadata";

struct CheckpointTaskFile {
  std::string file;               // relative to the checkpoint directory
  std::vector<std::string> nodes; // head first
  int subtask = 0;
  int parallelism = 1;
  std::uint64_t bytes = 0;
  std::vector<std::string> spool_files; // names in CHECKPOINT_DIR/NAME/spool the task needs
  // Incremental checkpoints (version 3): earlier checkpoints' files of this task that its state
  // builds on, oldest first, relative to this checkpoint's directory ("../chk-5/chain-0-
  // subtask-1.snap"), with their sizes. Empty: `file` holds the whole state.
  struct PreviousFile {
    std::string path;
    std::uint64_t bytes = 0;
    bool operator==(const PreviousFile&) const = default;
  };
  std::vector<PreviousFile> previous;
  // The task's record counters at the barrier (job_metrics.hpp encode_metrics), so that a job
  // restored from here counts on from what the checkpoint covers. Optional; empty: unknown.
  std::string counts;
};

struct CheckpointMetadata {
  std::int64_t version = 2; // of the file read; write_metadata always writes the current one
  std::string kind = "checkpoint"; // or "savepoint"
  std::string job_name;
  std::string job_id;
  std::uint64_t checkpoint_id = 0;
  std::int64_t created_at_ms = 0;
  int max_parallelism = 128;
  int chains = 0; // as read (version 2); write_metadata counts them from the tasks
  std::vector<CheckpointTaskFile> tasks;
};

// CHECKPOINT_DIR/NAME: `[checkpoint] dir` (relative to the pipeline file) or, by default,
// STATE_DIR/checkpoints, then the job's name.
std::filesystem::path checkpoint_root(const pipeline::PipelineSpec& spec, const std::filesystem::path& state_dir);

// The file name of a task's snapshot in a checkpoint directory.
std::string task_snapshot_file(int chain, int subtask);
// Whether `name` is exactly such a name ("chain-C-subtask-S.snap", decimal C and S): what a
// file sent by a worker may be called (snapshot_receiver.hpp), never a path.
bool is_task_snapshot_file(std::string_view name);

// The checkpoint id N of a `previous` path "../chk-N/chain-C-subtask-S.snap", if it is one.
std::optional<std::uint64_t> previous_checkpoint_of(std::string_view path);

// Writes dir/_metadata durably, in version 2 (3 when a task has `previous`), with `chains` counted from the
// tasks' distinct node lists and the checksum line. The directory's task files must already be
// durable.
Result<void> write_metadata(const std::filesystem::path& dir, const CheckpointMetadata& metadata);
// Reads dir/_metadata (dir may also name the _metadata file itself). Fails naming the file
// when it is missing (an incomplete checkpoint, or not one at all) or malformed.
Result<CheckpointMetadata> read_metadata(const std::filesystem::path& dir);
// dir itself, or its parent when `path` names a _metadata file.
std::filesystem::path checkpoint_dir_of(const std::filesystem::path& path);

// The completed checkpoints (chk-N with _metadata) under `root`, oldest first.
std::vector<std::filesystem::path> completed_checkpoints(const std::filesystem::path& root);
// The checkpoint or savepoint under `root` that was completed last (by id, then created_at),
// if any and if no run drained after it (mark_drained): what `run --resume` and `restart`
// restore. Where a run restored a snapshot (mark_restored) and no newer one completed here
// since, that snapshot, wherever it is (failing, naming it, when it is gone). Fails, naming it, when a chk-N or savepoint-...-N directory with a newer id than
// that one has a _metadata that cannot be read (damaged or edited): resuming from an older
// snapshot instead would publish again what was published after it.
Result<std::optional<std::filesystem::path>> latest_restorable(const std::filesystem::path& root);
// Records in `root`, before a run that restores `snapshot` (checkpoint id `id`, anywhere:
// a savepoint moved or on another file system is not under `root`) starts its workers, that
// the job now goes on from there: every snapshot under `root` with an id up to the largest
// used now (`superseding`) is older than it, or of a timeline the run left (an older savepoint
// restored). latest_restorable then resumes from `snapshot` until a snapshot newer than those
// completes under `root`, and refuses, naming it, when it is gone; next_checkpoint_id goes
// past `id`. TOML, written durably: restored = "PATH", restored_id = ID, superseding = N.
Result<void> mark_restored(const std::filesystem::path& root, const std::filesystem::path& snapshot,
                           std::uint64_t id);
// Records in `root` (when it exists) that a run of the job drained: it published everything
// it read, so no snapshot taken before now may be resumed from (latest_restorable skips
// them): `run --resume` after a drained run starts fresh instead of publishing again.
Result<void> mark_drained(const std::filesystem::path& root);

// One more than the largest checkpoint id used under `root` (by chk-N names and savepoint
// metadata), so ids never repeat across runs of the job.
std::uint64_t next_checkpoint_id(const std::filesystem::path& root);
// The newest snapshot id that `root` holds or that a run of the job drained past: chk-N and
// savepoint directories by name and metadata (leaving out the directory `except`, which may be
// one of them), and `drained`'s "checkpoint N". nullopt: none. Fails when `drained` is damaged
// or records a time only (streamctl before 2026-12), which names no id.
Result<std::optional<std::uint64_t>> newest_snapshot_id(const std::filesystem::path& root,
                                                        const std::filesystem::path& except);
// Deletes all but the newest `retain` completed checkpoints, every chk-N directory without
// _metadata but the one `in_flight` (the checkpoint being written now, if any: a failed one
// leaves nothing behind), and chk-N directories older than the newest completed one whose
// _metadata cannot be read. Savepoints are never deleted. A file that a retained
// checkpoint names in `previous` is kept, with its directory, until none does; the directory's
// _metadata goes first all the same, so it is never restored from once pruned. Returns what
// it could not delete, as messages. Only the coordinator holding the job's lock may call it.
std::vector<std::string> prune_checkpoints(const std::filesystem::path& root, int retain,
                                           std::optional<std::uint64_t> in_flight);

} // namespace streamctl::runtime
