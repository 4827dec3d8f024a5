#pragma once
// The keys every text source and sink shares: format, and csv's columns/types/delimiter/header.

#include <vector>

#include "pipeline/spec/node_schema.hpp"

namespace streamctl::operators {

std::vector<pipeline::KeySchema> text_format_keys();

} // namespace streamctl::operators
