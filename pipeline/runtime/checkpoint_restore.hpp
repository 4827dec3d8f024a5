#pragma once
// Reading a completed checkpoint or savepoint back for a task of a new plan, which may have
// another parallelism and other fused chains than the plan that wrote it: state is found by
// node name, keyed state by key group in whichever old file owned it (SPEC §7; Flink's
// key-group reassignment on rescale).
//
// open() reads _metadata (which must describe every task of the plan that wrote it, exactly
// once: checkpoint_completeness.hpp) and every file's header and index (not the segments), so
// that an incomplete list or a missing, truncated, resized or corrupt file is refused before
// anything starts; segments are read on demand, each checked by its checksum.
//
// An incremental checkpoint (checkpoint_metadata.hpp, version 3) is read as one snapshot per
// task: a key group's newest keyed segment in the task's files decides, an empty one meaning
// the group holds nothing, and every keyed_delta segment of the group in a later file of the
// chain is applied to it, oldest first (Operator::load_key_group_with_deltas); subtask,
// source and sink segments come from the task's own file.
//
// Not thread-safe: one per task thread.

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "operators/operator.hpp"
#include "pipeline/runtime/checkpoint_metadata.hpp"
#include "state/error.hpp"
#include "state/snapshot_format.hpp"

namespace streamctl::runtime {

class CheckpointRestore {
public:
  static Result<CheckpointRestore> open(const std::filesystem::path& dir);

  const std::filesystem::path& dir() const { return dir_; }
  const CheckpointMetadata& metadata() const { return metadata_; }
  // The nodes that wrote any state segment into the snapshot.
  const std::set<std::string>& nodes_with_state() const { return nodes_with_state_; }
  bool has_node(const std::string& node) const;

  // The files of task `task` (metadata().tasks' order): its `previous` files oldest first, then
  // its own.
  std::vector<const state::SnapshotReader*> task_files(std::size_t task) const;

  // Reads every segment of every file, checking its checksums.
  Result<void> verify();

  // The keyed segment of `node` for `key_group`, or nullopt when no old subtask wrote one.
  // Fails when deltas follow it (the group is what an operator makes of them: keyed_segments).
  Result<std::optional<std::string>> keyed(const std::string& node, std::uint32_t key_group);
  // The `kind` segment of every old subtask of `node`, indexed by old subtask (an empty
  // string where one wrote none); empty when the node is not in the snapshot.
  Result<std::vector<std::string>> per_subtask(const std::string& node, state::SegmentKind kind);

  // Where the keyed segment of a node for one key group is (keyed_segments).
  struct KeyedSegment {
    std::uint32_t key_group;
    const state::SnapshotReader* reader;   // null when the chain holds no keyed segment for it
    const state::SegmentInfo* segment;     // (the group was empty before the deltas)
    struct Delta {
      const state::SnapshotReader* reader;
      const state::SegmentInfo* segment;
    };
    std::vector<Delta> deltas; // the keyed_delta segments after it, oldest first
  };
  // The keyed segments of `node` for the groups of `range` that hold anything, in group order.
  std::vector<KeyedSegment> keyed_segments(const std::string& node, state::KeyGroupRange range) const;

private:
  // The newest keyed segment of `node` for `key_group` in task `task`'s files (its own file,
  // then its `previous` files newest first), or nulls, and the keyed_delta segments after it.
  KeyedSegment newest_keyed(std::size_t task, const std::string& node, std::uint32_t key_group) const;

  std::filesystem::path dir_;
  CheckpointMetadata metadata_;
  std::vector<state::SnapshotReader> readers_; // each task's own file, as metadata_.tasks
  // Each task's `previous` files (incremental checkpoints), oldest first; empty for a full one.
  std::vector<std::vector<state::SnapshotReader>> earlier_;
  std::set<std::string> nodes_with_state_;
};

// Restores the keyed state of `node` for the key groups of `range` into `op`, as calling
// op.restore_key_group for each group in order would, but with the segments read,
// decompressed and decoded (Operator::load_key_group) by up to hardware_concurrency helper
// threads, one group at a time each, while the calling (task) thread installs the groups in
// order. The helpers touch no state of the operator; all have ended when this returns. The
// failure is that of the first group, in group order, that fails: what a sequential restore
// reports ("key group 7: ..." for a segment the operator refuses). Groups for which `skip`
// says true are left alone: the operator has them already (a rescale that kept the worker).
Result<void> restore_key_groups(const CheckpointRestore& restore, const std::string& node,
                                state::KeyGroupRange range, operators::Operator& op,
                                const std::function<bool(std::uint32_t)>& skip = {});

// Checks, before a job starts from `restore`, that it fits `spec`: the same max_parallelism
// (another would move keys to other key groups), and every node that has state in it still
// present (unless `allow_non_restored_state`). Returns the problems, empty when it fits.
std::vector<std::string> check_restore_compatible(const CheckpointRestore& restore,
                                                  const pipeline::PipelineSpec& spec,
                                                  bool allow_non_restored_state);

} // namespace streamctl::runtime
