#pragma once
// Hands a record an operator cannot process to the node's on_error, as JSON text.

#include <string_view>

#include "operators/operator.hpp"

namespace streamctl::operators {

void report_bad_record(const OperatorContext& ctx, const state::Record& record, std::string_view reason);

} // namespace streamctl::operators
