#include "state/frozen_key_groups.hpp"

#include <thread>
#include <utility>

namespace streamctl::state {

FrozenKeyGroups::FrozenKeyGroups(KeyGroupRange range, std::vector<std::uint32_t> groups, Serialise serialise,
                                 Copy copy, std::size_t copy_budget)
    : range_(range), groups_(std::move(groups)), index_of_(range.size(), -1), serialise_(std::move(serialise)),
      copy_(std::move(copy)), copy_budget_(copy_budget),
      states_(std::make_unique<std::atomic<std::uint8_t>[]>(groups_.size())), bytes_(groups_.size()),
      copies_(groups_.size()), unsettled_(groups_.size()) {
  for (std::size_t i = 0; i < groups_.size(); ++i) {
    STREAMCTL_STATE_ASSERT(range_.contains(groups_[i]), "freezing a key group outside the range");
    STREAMCTL_STATE_ASSERT(index_of_[groups_[i] - range_.first] < 0, "freezing a key group twice");
    index_of_[groups_[i] - range_.first] = static_cast<std::int32_t>(i);
    states_[i].store(pending, std::memory_order_relaxed);
  }
}

FrozenKeyGroups::FrozenKeyGroups(KeyGroupRange range, std::vector<std::uint32_t> groups,
                                 std::vector<GroupCopy> copies)
    : FrozenKeyGroups(range, std::move(groups), Serialise{}, Copy{}) {
  STREAMCTL_STATE_ASSERT(copies.size() == groups_.size(), "a copy for each group");
  copies_ = std::move(copies);
  std::size_t held = 0;
  for (std::size_t i = 0; i < groups_.size(); ++i) {
    held += copies_[i].bytes;
    states_[i].store(copied, std::memory_order_relaxed);
  }
  copies_held_.store(held, std::memory_order_relaxed);
  unsettled_.store(0, std::memory_order_release);
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

FrozenKeyGroups::State FrozenKeyGroups::settle(std::size_t index, By by) {
  std::atomic<std::uint8_t>& state = states_[index];
  std::uint8_t expected = pending;
  if (state.compare_exchange_strong(expected, claimed, std::memory_order_acq_rel, std::memory_order_acquire)) {
    try {
      // Only the task copies: a copy spares the task the serialising, not the writer.
      if (by == By::task && copy_ && copies_held_.load(std::memory_order_relaxed) < copy_budget_) {
        copies_[index] = copy_(groups_[index]);
        copies_held_.fetch_add(copies_[index].bytes, std::memory_order_relaxed);
        stalls_.groups_copied += 1;
        stalls_.copied_bytes += copies_[index].bytes;
        finish(index, copied);
        return copied;
      }
      serialise_(groups_[index], bytes_[index]);
    } catch (...) {
      // Out of memory, say: the group is given up (the checkpoint fails without it) rather than
      // left claimed, which every later thaw, take and abandon would wait on for ever.
      copies_[index] = {};
      bytes_[index] = {};
      finish(index, abandoned);
      throw;
    }
    if (by == By::task) ++stalls_.groups_by_task;
    finish(index, done);
    return done;
  }
  // Another thread is at the group: wait until it publishes its result.
  const auto busy = [by](std::uint8_t s) { return s == claimed || (by == By::writer && s == writing_copy); };
  if (!busy(expected)) return static_cast<State>(expected);
  const auto start = std::chrono::steady_clock::now();
  do {
    state.wait(expected, std::memory_order_acquire);
    expected = state.load(std::memory_order_acquire);
  } while (busy(expected));
  if (by == By::task) stalls_.waited += std::chrono::steady_clock::now() - start;
  return static_cast<State>(expected);
}

void FrozenKeyGroups::record_stall(std::chrono::steady_clock::time_point start) {
  const auto took = std::chrono::steady_clock::now() - start;
  stalls_.total += took;
  if (took > stalls_.longest) stalls_.longest = std::chrono::duration_cast<std::chrono::nanoseconds>(took);
}

void FrozenKeyGroups::thaw_slow(std::uint32_t key_group) {
  if (!range_.contains(key_group)) return;
  const std::int32_t i = index_of_[key_group - range_.first];
  if (i < 0) return;
  const auto index = static_cast<std::size_t>(i);
  const auto s = states_[index].load(std::memory_order_acquire);
  if (s != pending && s != claimed) return;
  const auto start = std::chrono::steady_clock::now();
  settle(index, By::task);
  record_stall(start);
}

void FrozenKeyGroups::thaw_all() {
  if (settled()) return;
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < groups_.size(); ++i)
    settle(i, By::task);
  record_stall(start);
}

void FrozenKeyGroups::leave_to_task(std::size_t index) const {
  if (!copy_) return;
  const auto until = frozen_at_ + copy_grace;
  // A poll, not an atomic wait: that has no timeout. At most copy_grace for a whole checkpoint.
  while (states_[index].load(std::memory_order_acquire) == pending && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

std::optional<std::string> FrozenKeyGroups::take(std::size_t index) {
  std::atomic<std::uint8_t>& state = states_[index];
  leave_to_task(index);
  State s = settle(index, By::writer);
  if (s == copied) {
    std::uint8_t expected = copied;
    if (!state.compare_exchange_strong(expected, writing_copy, std::memory_order_acq_rel, std::memory_order_acquire))
      return std::nullopt; // abandoned meanwhile
    GroupCopy copy = std::exchange(copies_[index], {});
    try {
      copy.serialise(bytes_[index]);
    } catch (...) { // given up, not left writing_copy (see settle)
      copies_held_.fetch_sub(copy.bytes, std::memory_order_relaxed);
      bytes_[index] = {};
      state.store(abandoned, std::memory_order_release);
      state.notify_all();
      throw;
    }
    copies_held_.fetch_sub(copy.bytes, std::memory_order_relaxed);
    copy = {}; // freed before the next group is written
    state.store(done, std::memory_order_release);
    state.notify_all();
    s = done;
  }
  if (s != done) return std::nullopt;
  // Taken: `abandoned` from here on, so that an abandon() does not also free the bytes.
  std::uint8_t expected = done;
  if (!state.compare_exchange_strong(expected, abandoned, std::memory_order_acq_rel, std::memory_order_acquire))
    return std::nullopt; // abandoned meanwhile (and its bytes freed)
  return std::exchange(bytes_[index], {});
}

void FrozenKeyGroups::serialise_ahead() {
  for (std::size_t i = 0; i < groups_.size(); ++i) settle(i, By::writer);
}

void FrozenKeyGroups::abandon() {
  for (std::size_t i = 0; i < groups_.size(); ++i) {
    std::atomic<std::uint8_t>& state = states_[i];
    for (std::uint8_t s = state.load(std::memory_order_acquire); s != abandoned;) {
      if (s == claimed || s == writing_copy) { // a thread is at it: its result is published next
        state.wait(s, std::memory_order_acquire);
        s = state.load(std::memory_order_acquire);
        continue;
      }
      const std::uint8_t was = s; // pending, copied, or done and not taken
      if (!state.compare_exchange_strong(s, abandoned, std::memory_order_acq_rel, std::memory_order_acquire))
        continue; // claimed or taken meanwhile: s holds what it is now
      state.notify_all();
      if (was == pending) {
        unsettled_.fetch_sub(1, std::memory_order_acq_rel);
      } else if (was == copied) {
        copies_held_.fetch_sub(copies_[i].bytes, std::memory_order_relaxed);
        copies_[i] = {};
      } else {
        std::string().swap(bytes_[i]); // serialised by the task, never to be written
      }
      break;
    }
  }
}

std::shared_ptr<FrozenKeyGroups> KeyGroupFreezer::freeze(KeyGroupRange range, std::vector<std::uint32_t> groups,
                                                         FrozenKeyGroups::Serialise serialise,
                                                         FrozenKeyGroups::Copy copy, std::size_t copy_budget) {
  thaw_all();
  std::erase_if(earlier_, [](const std::weak_ptr<FrozenKeyGroups>& f) { return f.expired(); });
  for (auto& f : frozen_) earlier_.push_back(std::move(f));
  frozen_.clear();
  return freeze_also(range, std::move(groups), std::move(serialise), std::move(copy), copy_budget);
}

std::shared_ptr<FrozenKeyGroups> KeyGroupFreezer::freeze_also(KeyGroupRange range, std::vector<std::uint32_t> groups,
                                                              FrozenKeyGroups::Serialise serialise,
                                                              FrozenKeyGroups::Copy copy, std::size_t copy_budget) {
  frozen_.push_back(std::make_shared<FrozenKeyGroups>(range, std::move(groups), std::move(serialise),
                                                      std::move(copy), copy_budget));
  return frozen_.back();
}

std::shared_ptr<FrozenKeyGroups> KeyGroupFreezer::hold_copies(KeyGroupRange range, std::vector<std::uint32_t> groups,
                                                              std::vector<FrozenKeyGroups::GroupCopy> copies) {
  std::erase_if(earlier_, [](const std::weak_ptr<FrozenKeyGroups>& f) { return f.expired(); });
  auto held = std::make_shared<FrozenKeyGroups>(range, std::move(groups), std::move(copies));
  earlier_.push_back(held);
  return held;
}

void KeyGroupFreezer::abandon() {
  for (const auto& f : frozen_) f->abandon();
  for (const auto& earlier : earlier_)
    if (auto f = earlier.lock()) f->abandon();
  earlier_.clear();
}

void KeyGroupFreezer::check_write(std::uint32_t key_group) const {
  STREAMCTL_STATE_ASSERT(!unsettled(key_group),
                         "a key group frozen for a deferred snapshot changed before it was serialised "
                         "(a mutation path without thaw())");
}

} // namespace streamctl::state
