#pragma once
// `type = "zmq"`: one record per ZeroMQ message from a PULL or SUB socket that connects to
// (or, with `bind = true`, binds) `endpoint`; of a multipart message, the last frame is the
// record (the frames before it are a SUB topic or an envelope). SUB subscribes to each prefix
// of `subscribe` (default: everything). One subtask; its own ZeroMQ context.
//
// Exactly-once through the spool (operators/spooled_line_source.hpp): messages taken from
// the socket are replayed after a restart; messages queued inside a killed worker's socket
// are lost with it, as ZeroMQ keeps nothing for a dead peer (PUSH resends only what it had
// not handed over; PUB never resends).

#include <memory>

#include "operators/registry.hpp"

namespace streamctl::connectors {

pipeline::NodeTypeSchema zmq_source_schema();
std::unique_ptr<operators::Source> make_zmq_source(const pipeline::PipelineSpec&,
                                                   const pipeline::NodeSpec&, state::FieldNames&);

} // namespace streamctl::connectors
