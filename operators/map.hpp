#pragma once
// `type = "map"`: `set = {f = "expr"}`, then `rename = {old = "new"}`, then `remove = [...]`.
// Every `set` expression sees the input record, not the fields other `set`s assign.

#include "operators/registry.hpp"

namespace streamctl::operators {

pipeline::NodeTypeSchema map_schema();
std::unique_ptr<Operator> make_map(const pipeline::PipelineSpec&, const pipeline::NodeSpec&,
                                   state::FieldNames&);

} // namespace streamctl::operators
