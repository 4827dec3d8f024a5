#pragma once
// A restore from a savepoint that the job's incremental checkpoints can build on.
//
// A savepoint is self-contained and belongs to the person who took it: they may move or
// delete it, so no checkpoint may name its files (SPEC §7). The first checkpoint after
// `run --from-savepoint` was therefore full: with 1 GB of keyed state, 400 MB written and a
// stall of two seconds while the task copied every key group ahead of the writer. Instead the
// coordinator adopts the savepoint before it starts the workers: it makes it a checkpoint of
// the job, CHECKPOINT_DIR/NAME/chk-S (S: the savepoint's id), whose task files are hard links
// to the savepoint's (no byte copied; what becomes of the savepoint later does not touch
// them), and whose _metadata is the savepoint's with kind "checkpoint". The workers restore
// from chk-S, and, as after `run --resume`, a task the same as the one that wrote its file
// goes on with that file as the base of its chain (worker.cpp, continue_restored_chain).
//
// Only where that is as safe as a resume, otherwise nothing is adopted and the first
// checkpoint is full, as before:
// - the savepoint is of this job (its name), in metadata version 2 (no older format);
// - S is newer than every snapshot under the job's checkpoint directory and than what a run
//   that drained covered (`drained`): chk-S is then the newest checkpoint, the one a restart
//   restores, and later checkpoints' ids (from S + 1) rise past it;
// - the files can be linked (the same file system; EXDEV, EPERM and the like: not adopted).
// Crash-safe: the links first, synced, and _metadata last (write_metadata, atomic), so a crash
// in between leaves a chk-S without _metadata, which is never restored and is pruned, and a
// later run adopts nothing (chk-S is taken).
//
// Only the coordinator holding the job's lock may call it (checkpoint_dir_lock.hpp).

#include <filesystem>
#include <string>

#include "state/error.hpp"

namespace streamctl::runtime {

// The adopted checkpoint's directory, or why the savepoint at `savepoint` (already checked by
// check_restore) was not adopted into `root` (CHECKPOINT_DIR/NAME) for job `job_name`.
Result<std::filesystem::path> adopt_savepoint(const std::filesystem::path& root,
                                              const std::filesystem::path& savepoint,
                                              const std::string& job_name);

} // namespace streamctl::runtime
