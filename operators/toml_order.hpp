#pragma once
// toml++ tables iterate in key order; `set` and `aggregates` keep the order the file gives.

#include <string>
#include <utility>
#include <vector>

#include <toml++/toml.h>

namespace streamctl::operators {

// The entries of `table` (may be null) sorted by their position in the file.
std::vector<std::pair<std::string, const toml::node*>> in_file_order(const toml::table* table);

} // namespace streamctl::operators
