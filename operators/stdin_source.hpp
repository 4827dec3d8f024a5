#pragma once
// `type = "stdin"`: lines from the job's standard input. Always one subtask.

#include "operators/registry.hpp"

namespace streamctl::operators {

pipeline::NodeTypeSchema stdin_source_schema();
std::unique_ptr<Source> make_stdin_source(const pipeline::PipelineSpec&, const pipeline::NodeSpec&,
                                          state::FieldNames&);

} // namespace streamctl::operators
