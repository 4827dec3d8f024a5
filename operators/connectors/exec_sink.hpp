#pragma once
// `type = "exec"` sink: pipes records, one line each (`format`, json by default), into the
// stdin of `command` (an argv array, found on PATH, no shell: ["sh", "-c", "..."] for one),
// one command per sink subtask, started when the task starts. Its stdout and stderr go to the
// worker's stderr, each line prefixed by "[NODE] " (sink_command.hpp).
//
// At the end of input (finish, when the job publishes its final output) the sink closes the
// command's stdin and waits for it; a command that exits non-zero or dies fails the task, as
// does one that stops reading its input mid-stream (EPIPE), naming the node and the exit
// status; the coordinator restarts the job per [restart] where it can (not from a failed final
// publish without checkpoints). With checkpoints the output is at-least-once (SPEC §7): a
// restore sends again what came after the checkpoint, numbered alike with `sequence_field`.

#include "operators/registry.hpp"

namespace streamctl::connectors {

pipeline::NodeTypeSchema exec_sink_schema();
std::unique_ptr<operators::Sink> make_exec_sink(const pipeline::PipelineSpec&,
                                                const pipeline::NodeSpec&, state::FieldNames&);

} // namespace streamctl::connectors
