#pragma once
// `type = "tcp"`: listens on `address` ("HOST:PORT") and takes one record per line from every
// connection, many at once; lines of different connections interleave only whole, and the
// unterminated last line of a closed connection is a record too. One subtask (it owns the
// address). Exactly-once through the spool (operators/spooled_line_source.hpp): what was
// read from the sockets is replayed after a restart; what the kernel had received but the
// dead worker had not read is lost with its sockets, as with any tcp receiver.

#include <memory>

#include "operators/registry.hpp"

namespace streamctl::connectors {

pipeline::NodeTypeSchema tcp_source_schema();
std::unique_ptr<operators::Source> make_tcp_source(const pipeline::PipelineSpec&,
                                                   const pipeline::NodeSpec&, state::FieldNames&);

} // namespace streamctl::connectors
