#pragma once
// `type = "file"`: `path` is a directory of part files `part-<subtask>-<n>.<format>`. A part
// file is written as `.part-<subtask>-<n>.<format>` and becomes visible by an atomic rename,
// after fsync, when the checkpoint that covers it completes, or when the job ends without
// checkpoints (SPEC §6); a failed or cancelled job leaves no visible part of its own.
//
// Two-phase commit: pre_commit closes and fsyncs the part in progress (the next write opens
// part n+1) and records its name; commit publishes what every checkpoint up to it prepared;
// a restore publishes what the restored checkpoint prepared and deletes the parts in progress
// that no checkpoint covers. <n> is never one a file of the subtask already has, so runs and
// restarts never overwrite each other.

#include "operators/registry.hpp"

namespace streamctl::operators {

pipeline::NodeTypeSchema file_sink_schema();
// Throws Error(Usage) naming the position of `path` when the directory cannot be created or
// written.
std::unique_ptr<Sink> make_file_sink(const pipeline::PipelineSpec&, const pipeline::NodeSpec&,
                                     state::FieldNames&);

} // namespace streamctl::operators
