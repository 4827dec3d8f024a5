#pragma once
// Incremental checkpoints ([checkpoint] incremental = true): what one task writes at each
// checkpoint, and which earlier files its _metadata entry names (checkpoint_metadata.hpp,
// version 3).
//
// A task's first checkpoint after it starts is full. Each later one writes only the key groups
// that changed (Operator::take_changed_key_groups; every group of an operator that does not
// track changes, and every subtask, source and sink segment) since the newest checkpoint this
// task knows to be complete, its base, and names the base's files as `previous`. The changes
// since the base are those taken at every snapshot after it, completed or not: a checkpoint
// that failed, or a savepoint, is never a base, so what changed before it is written again.
// A base is a completed chk-N of this task's own: never a savepoint (self-contained, and a
// person may delete it), nor a file sent to the coordinator ([checkpoint] storage =
// "coordinator": full snapshots only, for now).
//
// Finer than a key group: of an operator that tracks its entries (Operator::
// take_changed_entries: the keyed window), a changed group is written as a keyed_delta segment
// (state/snapshot_format.hpp): the entries changed since the base as they are now, and the
// keys erased, which a restore applies to the group's newest keyed segment in the chain. Like
// the changed groups, the changed keys since the base are the union of those taken at every
// snapshot after it, so a failed checkpoint loses none. A group is written whole when any
// snapshot since the base took it without its entries (a restore, or too many changes), and
// when so many of its entries changed that writing it whole is cheaper (the operator decides:
// ChangedEntries::delta_pays).
//
// Rolling wholes: a full checkpoint of all the state at once holds the task for as long as
// serialising all of it takes (5.6 s for 1 GB) and writes it in one burst. So the task writes
// its key groups whole a slice at a time instead: the groups of its range are dealt into
// `full_every` slices (group - first, modulo that), and each incremental checkpoint also writes
// one slice whole, the one whose newest whole copy is oldest. Once every slice has a whole copy
// newer than a file of the chain, that file holds nothing a restore reads (a group is read from
// its newest whole segment, and the deltas after it), and it leaves the chain: a chain is at
// most `full_every` files, and no checkpoint after the first writes the whole state. A
// checkpoint that fails covered nothing, so its slice is the next one's again. Each group of a
// restore is then read as one whole segment and at most `full_every` - 1 deltas, each written
// only while it is under about a quarter of the group (ChangedEntries::delta_pays).
//
// A full checkpoint is written again when the chain of files would reach `full_every` (without
// key groups to deal, or with rolling off), or when the deltas since the last full one hold
// more bytes than it (rolling off: a restore then reads at most about twice the state).
//
// After a restart from the job's own newest checkpoint (a worker died, `streamctl restart`), a
// task whose identity is unchanged (chain, subtask, parallelism, key groups) goes on with the
// chain it restored, which holds exactly its state, rather than writing all of it again:
// continue_restored() makes that chain the base, and the operators forget that the restore
// changed every group. With rolling, only when every slice has a whole copy in the chain
// (otherwise a full snapshot first, as before); without, the chain begins with a full one. And
// only in the same checkpoint directory: the first checkpoint into another starts full.
//
// Not thread-safe: the task's thread only.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "operators/operator.hpp"
#include "pipeline/runtime/checkpoint_metadata.hpp"
#include "state/key_group.hpp"

namespace streamctl::runtime {

struct IncrementalSettings {
  bool enabled = false;
  int full_every = 10; // files in a chain at most, the full one included
  bool rolling = false; // whole groups a slice at a time, not a full checkpoint ([checkpoint] rolling)
};

IncrementalSettings incremental_settings_of(const pipeline::PipelineSpec& spec);

// A task's `previous` files as its ACK carries them to the coordinator: "BYTES PATH" lines.
std::string encode_previous_files(const std::vector<CheckpointTaskFile::PreviousFile>& files);
// nullopt when `text` is not such lines of valid previous paths (previous_checkpoint_of).
std::optional<std::vector<CheckpointTaskFile::PreviousFile>> decode_previous_files(std::string_view text);

class IncrementalSnapshots {
public:
  // `key_groups`: the task's range, dealt into slices for rolling wholes (empty: no rolling).
  IncrementalSnapshots(IncrementalSettings settings, std::string own_file, state::KeyGroupRange key_groups = {});

  struct Plan {
    std::vector<CheckpointTaskFile::PreviousFile> previous; // empty: a full snapshot
    // Per operator of the chain (TaskChain's order): the key groups to write, sorted; nullopt:
    // every group (a full snapshot, or an operator that does not track changes).
    std::vector<std::optional<std::vector<std::uint32_t>>> groups;
    // Per operator, of its groups above: those to write as deltas, each with the keys changed
    // since the base (each once; Operator::snapshot_key_group_delta).
    std::vector<std::map<std::uint32_t, std::vector<std::string>>> deltas;
    // Per operator, the groups of `deltas` whose keys are those of this snapshot's take alone,
    // as the take gave them: the operator may write these from what it copied as it took them
    // (Operator::defer_key_group_deltas). The others' keys are several takes' (a checkpoint
    // in between did not complete).
    std::vector<std::set<std::uint32_t>> deltas_of_this_take;
    bool incremental() const { return !previous.empty(); }
  };

  // The snapshot of checkpoint `id` into `dir`: takes every operator's changed groups (at
  // every snapshot, so that none is lost) and decides what to write.
  // `deferred`: the snapshot is deferred (TaskChain::snapshot_operators_deferred), and the
  // operators may leave the keys of a take unresolved (Operator::take_changed_entries): such a
  // group is a delta of `deltas_of_this_take` (with no keys) or written whole.
  Plan plan(std::uint64_t id, const std::filesystem::path& dir, bool savepoint,
            const std::vector<operators::Operator*>& operators, bool deferred = false);
  // The snapshot of `id` is durable, `bytes` long.
  void written(std::uint64_t id, std::uint64_t bytes);
  // Checkpoint `id` completed (the coordinator's COMMIT): later snapshots may build on it.
  void completed(std::uint64_t id);

  // The task was restored from checkpoint `id` under `root` (the job's checkpoint directory),
  // whose files for this task are `files` ("../chk-N/FILE" paths, oldest first, the
  // checkpoint's own file last). `holds_whole(f, g)`: files[f] holds key group g whole.
  // Returns true when that chain is now the base (then the caller must make the operators
  // forget what the restore changed); false when incremental checkpoints are off, the chain is
  // as long as a chain may be, or (rolling) some slice of the key groups has no whole copy in
  // it: the first checkpoint is full.
  bool continue_restored(const std::filesystem::path& root, std::uint64_t id,
                         std::vector<CheckpointTaskFile::PreviousFile> files,
                         const std::function<bool(std::size_t, std::uint32_t)>& holds_whole);

private:
  struct Taken {
    std::vector<std::optional<std::vector<std::uint32_t>>> changed; // per operator; nullopt: untracked
    // Per operator, the groups of `changed` taken with their entries (nullopt: no entries).
    std::vector<std::optional<std::map<std::uint32_t, std::vector<std::string>>>> entries;
    // Per operator, the groups of `entries` whose keys the take left unresolved (no keys).
    std::vector<std::set<std::uint32_t>> unresolved;
    std::vector<CheckpointTaskFile::PreviousFile> previous;
    std::vector<std::uint64_t> whole_at; // as Base::whole_at once this snapshot is a base
    bool may_be_base = false;
    std::optional<std::uint64_t> bytes;
  };
  struct Base {
    std::uint64_t id = 0;
    std::vector<CheckpointTaskFile::PreviousFile> files; // oldest first, the base's own last
    // Per slice of the key groups (rolling wholes): the checkpoint whose file holds its newest
    // whole copy. Every file of the chain is at least as new as the oldest of these.
    std::vector<std::uint64_t> whole_at;
  };

  bool start_full() const;
  std::size_t slices() const;
  // The groups of slice `slice` (every one of the task's range), sorted.
  std::vector<std::uint32_t> slice_groups(std::size_t slice) const;

  IncrementalSettings settings_;
  std::string own_file_;
  state::KeyGroupRange key_groups_;
  std::optional<Base> base_;
  // Set while the base is a restored chain that no checkpoint of this task has built on yet:
  // its checkpoint directory, which the next one must be in.
  std::optional<std::filesystem::path> restored_root_;
  std::map<std::uint64_t, Taken> taken_; // snapshots after the base, by checkpoint id
};

} // namespace streamctl::runtime
