#pragma once
// `type = "zmq"` sink: one ZeroMQ message per record (its line, without the newline) on a
// `socket = "PUSH" | "PUB"` that connects to `endpoint`, or binds it with `bind = true`.
//
// ZeroMQ's semantics hold: PUSH blocks when no peer can take a message (backpressure); PUB
// drops messages no subscriber takes, and those sent before a subscriber has joined. At the
// end of the job, queued messages get up to `linger` (default 5s) to go out. ZeroMQ does not
// acknowledge: a message handed to a peer that then crashes is gone, so with checkpoints the
// output is at-least-once only across failures of the job's own workers (a restore resends
// what came after the checkpoint), numbered alike when `sequence_field` is set.

#include "operators/registry.hpp"

namespace streamctl::connectors {

pipeline::NodeTypeSchema zmq_sink_schema();
std::unique_ptr<operators::Sink> make_zmq_sink(const pipeline::PipelineSpec&,
                                               const pipeline::NodeSpec&, state::FieldNames&);

} // namespace streamctl::connectors
