#pragma once
// `type = "file"`: `path` is a directory of part files `part-<subtask>-<n>.<format>`. A part
// file is written as `.part-<subtask>-<n>.<format>` and becomes visible by an atomic rename,
// after fsync, when the job ends (SPEC §6); a failed or cancelled job leaves no visible part.
// <n> is the first number not used by an earlier run, so runs never overwrite each other.

#include "operators/registry.hpp"

namespace streamctl::operators {

pipeline::NodeTypeSchema file_sink_schema();
// Throws Error(Usage) naming the position of `path` when the directory cannot be created or
// written.
std::unique_ptr<Sink> make_file_sink(const pipeline::PipelineSpec&, const pipeline::NodeSpec&,
                                     state::FieldNames&);

} // namespace streamctl::operators
