#pragma once
// Which key groups of a subtask's range changed since the last incremental checkpoint took
// them (Operator::take_changed_key_groups): a byte per group and the list of those set, so
// that marking costs one load and compare per update and taking costs what changed.
//
// An operator marks a group whenever anything that its snapshot_key_group writes for the group
// may differ: an entry inserted, updated or erased, a timer registered or fired. A group
// marked needlessly is only written again; one not marked that changed would be restored
// stale, so mark generously.

#include <cstdint>
#include <vector>

#include "state/key_group.hpp"

namespace streamctl::state {

class ChangedGroups {
public:
  ChangedGroups() = default;
  explicit ChangedGroups(KeyGroupRange range) : range_(range), marked_(range.size(), 0) {}

  void mark(std::uint32_t key_group) {
    if (!range_.contains(key_group)) return; // not this subtask's to write (a default-made one: none is)
    std::uint8_t& flag = marked_[key_group - range_.first];
    if (flag) return;
    flag = 1;
    list_.push_back(key_group);
  }
  // Every group of the range (a restore, a rescale: everything is new).
  void mark_all() {
    for (std::uint32_t g = range_.first; g < range_.end; ++g) mark(g);
  }
  // Appends the marked groups to `out` (in marking order) and unmarks them.
  void take(std::vector<std::uint32_t>& out) {
    for (std::uint32_t g : list_) marked_[g - range_.first] = 0;
    out.insert(out.end(), list_.begin(), list_.end());
    list_.clear();
  }

private:
  KeyGroupRange range_;
  std::vector<std::uint8_t> marked_;
  std::vector<std::uint32_t> list_;
};

} // namespace streamctl::state
