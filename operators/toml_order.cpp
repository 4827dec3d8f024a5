#include "operators/toml_order.hpp"

#include <algorithm>

namespace streamctl::operators {

std::vector<std::pair<std::string, const toml::node*>> in_file_order(const toml::table* table) {
  std::vector<std::pair<std::string, const toml::node*>> entries;
  if (table == nullptr) return entries;
  for (const auto& [key, value] : *table) entries.emplace_back(std::string(key.str()), &value);
  std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    const auto& pa = a.second->source().begin;
    const auto& pb = b.second->source().begin;
    return pa.line != pb.line ? pa.line < pb.line : pa.column < pb.column;
  });
  return entries;
}

} // namespace streamctl::operators
