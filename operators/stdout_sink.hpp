#pragma once
// `type = "stdout"`: records as lines on the job's standard output. Always one subtask, so
// lines of different subtasks never interleave.
//
// Without checkpoints, lines go straight to stdout. With them (the task's checkpoint directory
// is set), output is exactly-once: lines wait in a pending file in the checkpoint directory
// and reach stdout only when a checkpoint covering them completes, or when the whole job ends
// (SPEC §6-§7). A crash while one such file is being copied to stdout can repeat a little of it
// (stdout_sink.cpp says how much).

#include "operators/registry.hpp"

namespace streamctl::operators {

pipeline::NodeTypeSchema stdout_sink_schema();
std::unique_ptr<Sink> make_stdout_sink(const pipeline::PipelineSpec&, const pipeline::NodeSpec&,
                                       state::FieldNames&);

} // namespace streamctl::operators
