#pragma once
// `type = "reduce"`: running aggregates per key (SPEC §6). For every input record it updates
// its key's aggregates and emits the updated row: the key fields, then the aggregates in the
// order the file names them. `ttl` forgets a key that has seen no record for that long
// (processing time), so that its next record starts afresh.
//
// A missing key field counts as null, and null is a key value like any other.

#include "operators/registry.hpp"

namespace streamctl::operators {

pipeline::NodeTypeSchema reduce_schema();
std::unique_ptr<Operator> make_reduce(const pipeline::PipelineSpec&, const pipeline::NodeSpec&,
                                      state::FieldNames&);

} // namespace streamctl::operators
