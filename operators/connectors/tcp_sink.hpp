#pragma once
// `type = "tcp"` sink: connects to `address = "host:port"` and writes one line per record
// (`format`, json by default). A peer that is down or a connection that breaks is waited for
// (reconnect with backoff; tcp_writer.hpp), not a failure; a host name that does not resolve
// is. Output is at-least-once with checkpoints (SPEC §7): lines since the last checkpoint may
// reach the peer twice, numbered alike when `sequence_field` is set (sequence_numbers.hpp).

#include "operators/registry.hpp"

namespace streamctl::connectors {

pipeline::NodeTypeSchema tcp_sink_schema();
std::unique_ptr<operators::Sink> make_tcp_sink(const pipeline::PipelineSpec&,
                                               const pipeline::NodeSpec&, state::FieldNames&);

} // namespace streamctl::connectors
