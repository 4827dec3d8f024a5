#pragma once
// `type = "exec"` as an operator (SPEC §6): a user-defined function in any language. Each
// subtask runs the command once, for its whole life, and talks to it over pipes:
//
//   streamctl -> command stdin:  the records of a batch, one JSON object a line, then one empty
//                                line (the sync line) that ends the batch
//   command stdout -> streamctl: any number of JSON object lines (its answer to the batch),
//                                then one empty line: the batch is done
//
// Everything the command prints between two sync lines is the answer to that batch, so order
// is kept and outputs are never matched to the wrong batch. A batch's answer is read in full
// before process() returns: nothing is inside the command at a checkpoint barrier, which makes
// a stateless command exactly-once by replay (state kept inside the command is lost on
// restore). Writes and reads are interleaved on non-blocking pipes, so a command that prints
// far more than it reads never deadlocks, and nothing is buffered beyond one batch's answer.
//
// Keys: command (argv array, no shell; run in the pipeline file's directory), key (route by
// these fields, so that one subtask sees every record of a key, in order), env (extra
// environment), timeout (default 30s: a command that owes an answer and neither reads nor
// writes for that long fails the job). A non-JSON output line is a bad record (on_error). A
// command that exits or closes its stdout before the end of input fails the job, naming the
// node, the command and its exit status. Its stderr goes to the worker's stderr, each line
// prefixed with "[exec NODE/SUBTASK] ". At the end of input its stdin is closed; what it prints
// before it exits is output too, and it must exit with status 0.

#include "operators/registry.hpp"

namespace streamctl::connectors {

pipeline::NodeTypeSchema exec_operator_schema();
std::unique_ptr<operators::Operator>
make_exec_operator(const pipeline::PipelineSpec&, const pipeline::NodeSpec&, state::FieldNames&);

} // namespace streamctl::connectors
