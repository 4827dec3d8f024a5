#pragma once
// `type = "stdout"`: records as lines on the job's standard output. Always one subtask, so
// lines of different subtasks never interleave.

#include "operators/registry.hpp"

namespace streamctl::operators {

pipeline::NodeTypeSchema stdout_sink_schema();
std::unique_ptr<Sink> make_stdout_sink(const pipeline::PipelineSpec&, const pipeline::NodeSpec&,
                                       state::FieldNames&);

} // namespace streamctl::operators
