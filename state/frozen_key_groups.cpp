#include "state/frozen_key_groups.hpp"

#include <utility>

namespace streamctl::state {

FrozenKeyGroups::FrozenKeyGroups(KeyGroupRange range, std::vector<std::uint32_t> groups, Serialise serialise)
    : range_(range), groups_(std::move(groups)), index_of_(range.size(), -1), serialise_(std::move(serialise)),
      states_(std::make_unique<std::atomic<std::uint8_t>[]>(groups_.size())), bytes_(groups_.size()),
      unsettled_(groups_.size()) {
  for (std::size_t i = 0; i < groups_.size(); ++i) {
    STREAMCTL_STATE_ASSERT(range_.contains(groups_[i]), "freezing a key group outside the range");
    STREAMCTL_STATE_ASSERT(index_of_[groups_[i] - range_.first] < 0, "freezing a key group twice");
    index_of_[groups_[i] - range_.first] = static_cast<std::int32_t>(i);
    states_[i].store(pending, std::memory_order_relaxed);
  }
}

bool FrozenKeyGroups::unsettled(std::uint32_t key_group) const {
  if (!range_.contains(key_group)) return false;
  const std::int32_t i = index_of_[key_group - range_.first];
  if (i < 0) return false;
  const auto s = states_[static_cast<std::size_t>(i)].load(std::memory_order_acquire);
  return s == pending || s == claimed;
}

void FrozenKeyGroups::finish(std::size_t index, State to) {
  states_[index].store(to, std::memory_order_release);
  states_[index].notify_all();
  unsettled_.fetch_sub(1, std::memory_order_acq_rel);
}

bool FrozenKeyGroups::settle(std::size_t index) {
  std::atomic<std::uint8_t>& state = states_[index];
  std::uint8_t expected = pending;
  if (state.compare_exchange_strong(expected, claimed, std::memory_order_acq_rel, std::memory_order_acquire)) {
    serialise_(groups_[index], bytes_[index]);
    finish(index, done);
    return true;
  }
  while (expected == claimed) {
    state.wait(claimed, std::memory_order_acquire);
    expected = state.load(std::memory_order_acquire);
  }
  return false;
}

void FrozenKeyGroups::thaw_slow(std::uint32_t key_group) {
  if (!range_.contains(key_group)) return;
  const std::int32_t i = index_of_[key_group - range_.first];
  if (i < 0) return;
  const auto index = static_cast<std::size_t>(i);
  const auto s = states_[index].load(std::memory_order_acquire);
  if (s == done || s == abandoned) return;
  const auto start = std::chrono::steady_clock::now();
  if (settle(index)) ++stalls_.groups_by_task;
  const auto took = std::chrono::steady_clock::now() - start;
  stalls_.total += took;
  if (took > stalls_.longest) stalls_.longest = std::chrono::duration_cast<std::chrono::nanoseconds>(took);
}

void FrozenKeyGroups::thaw_all() {
  if (settled()) return;
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < groups_.size(); ++i)
    if (settle(i)) ++stalls_.groups_by_task;
  const auto took = std::chrono::steady_clock::now() - start;
  stalls_.total += took;
  if (took > stalls_.longest) stalls_.longest = std::chrono::duration_cast<std::chrono::nanoseconds>(took);
}

std::optional<std::string> FrozenKeyGroups::take(std::size_t index) {
  settle(index);
  if (states_[index].load(std::memory_order_acquire) != done) return std::nullopt;
  return std::exchange(bytes_[index], {});
}

void FrozenKeyGroups::abandon() {
  for (std::size_t i = 0; i < groups_.size(); ++i) {
    std::atomic<std::uint8_t>& state = states_[i];
    std::uint8_t expected = pending;
    if (state.compare_exchange_strong(expected, abandoned, std::memory_order_acq_rel, std::memory_order_acquire)) {
      finish(i, abandoned);
      continue;
    }
    while (expected == claimed) {
      state.wait(claimed, std::memory_order_acquire);
      expected = state.load(std::memory_order_acquire);
    }
  }
}

std::shared_ptr<FrozenKeyGroups> KeyGroupFreezer::freeze(KeyGroupRange range, std::vector<std::uint32_t> groups,
                                                         FrozenKeyGroups::Serialise serialise) {
  thaw_all();
  frozen_ = std::make_shared<FrozenKeyGroups>(range, std::move(groups), std::move(serialise));
  return frozen_;
}

void KeyGroupFreezer::check_write(std::uint32_t key_group) const {
  STREAMCTL_STATE_ASSERT(!frozen_ || !frozen_->unsettled(key_group),
                         "a key group frozen for a deferred snapshot changed before it was serialised "
                         "(a mutation path without thaw())");
}

} // namespace streamctl::state
