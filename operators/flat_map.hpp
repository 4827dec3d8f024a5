#pragma once
// `type = "flat_map"`: one record in, zero or more out.
//   explode = "field"                               one record per element of an array field
//   split = {field = "text", by = " ", as = "word"}  one record per non-empty piece of a string
// The other fields are kept. A null or missing field gives no record; a field of another type
// is a bad record (on_error).

#include "operators/registry.hpp"

namespace streamctl::operators {

pipeline::NodeTypeSchema flat_map_schema();
std::unique_ptr<Operator> make_flat_map(const pipeline::PipelineSpec&, const pipeline::NodeSpec&,
                                        state::FieldNames&);

} // namespace streamctl::operators
