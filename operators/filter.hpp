#pragma once
// `type = "filter"`: keeps the records for which `where` is true (null counts as false).

#include "operators/registry.hpp"

namespace streamctl::operators {

pipeline::NodeTypeSchema filter_schema();
std::unique_ptr<Operator> make_filter(const pipeline::PipelineSpec&, const pipeline::NodeSpec&,
                                      state::FieldNames&);

} // namespace streamctl::operators
