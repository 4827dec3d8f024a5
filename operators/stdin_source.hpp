#pragma once
// `type = "stdin"`: lines from the job's standard input. Always one subtask.
//
// When the job takes checkpoints (OperatorContext::checkpoint_dir set), everything read from
// stdin is first appended to a spool file there (operators/spooled_line_source.hpp) and the lines are read
// back from it: the position is the spool file's name and the offset consumed, so a restore
// replays what was read but not emitted, then goes on reading stdin.

#include "operators/registry.hpp"

namespace streamctl::operators {

pipeline::NodeTypeSchema stdin_source_schema();
std::unique_ptr<Source> make_stdin_source(const pipeline::PipelineSpec&, const pipeline::NodeSpec&,
                                          state::FieldNames&);
// The same, reading `fd` (not owned) instead of fd 0: for tests, and for a worker that gets
// the job's input on another descriptor.
std::unique_ptr<Source> make_stdin_source_reading(int fd, const pipeline::PipelineSpec&,
                                                  const pipeline::NodeSpec&, state::FieldNames&);

} // namespace streamctl::operators
