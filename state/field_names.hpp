#pragma once
// Field names are interned to small integers once per process, so that records carry a 4-byte
// id per field and expressions look fields up by id. Ids are local to a process: the binary
// batch encoding carries the names themselves and the reader re-interns them.
// Not thread-safe: one FieldNames belongs to one task thread.

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace streamctl::state {

using FieldId = std::uint32_t;

class FieldNames {
public:
  FieldId intern(std::string_view name) {
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    names_.emplace_back(name);
    FieldId id = static_cast<FieldId>(names_.size() - 1);
    ids_.emplace(names_.back(), id);
    return id;
  }

  std::optional<FieldId> find(std::string_view name) const {
    auto it = ids_.find(name);
    if (it == ids_.end()) return std::nullopt;
    return it->second;
  }

  std::string_view name(FieldId id) const { return names_[id]; }
  std::size_t size() const { return names_.size(); }

private:
  // A deque keeps each string (and so the views used as map keys) at a fixed address.
  std::deque<std::string> names_;
  std::unordered_map<std::string_view, FieldId> ids_;
};

} // namespace streamctl::state
