#pragma once
// `type = "exec"`: runs `command` (an argv array, no shell) in the pipeline file's directory
// and takes one record per line of its stdout; its stderr lines go to the job's log (the
// worker's stderr) as "exec source 'NAME': LINE". Exit status 0 ends the input; any other
// status, or a signal, fails the job (which restarts per [restart]). One subtask.
//
// With checkpoints, what the command printed is spooled (operators/spooled_line_source.hpp)
// and replayed after a restart; the command itself is started again by every attempt, and
// what it prints is read after the spool's tail: a command that prints again from its start
// gives those lines twice. A command that resumes where it stopped gets exactly-once.

#include <memory>

#include "operators/registry.hpp"

namespace streamctl::connectors {

pipeline::NodeTypeSchema exec_source_schema();
std::unique_ptr<operators::Source> make_exec_source(const pipeline::PipelineSpec&,
                                                    const pipeline::NodeSpec&, state::FieldNames&);

} // namespace streamctl::connectors
