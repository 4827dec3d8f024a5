#include "state/recycled_memory.hpp"

#include <pthread.h>
#include <sched.h>
#include <sys/sysinfo.h>

#include <algorithm>
#include <iterator>

#include "state/table_memory.hpp"

namespace streamctl::state {

RecycledMemory::~RecycledMemory() {
  for (auto& [shape, kept] : kept_) free_table(kept.block, shape.first, std::align_val_t(shape.second));
}

void* RecycledMemory::allocate(std::size_t bytes, std::align_val_t align) {
  const Shape shape{bytes, static_cast<std::size_t>(align)};
  {
    std::lock_guard lock(mutex_);
    // The block kept last: the ones used at every checkpoint stay in use, and the rest age out.
    if (auto [first, last] = kept_.equal_range(shape); first != last) {
      auto it = std::prev(last);
      void* p = it->second.block;
      kept_.erase(it);
      retained_ -= bytes;
      ++reused_;
      return p;
    }
    ++fresh_;
  }
  return allocate_table(bytes, align);
}

void RecycledMemory::free(void* p, std::size_t bytes, std::align_val_t align) noexcept {
  std::vector<std::pair<Shape, void*>> aged;
  bool kept = false;
  {
    std::lock_guard lock(mutex_);
    try {
      aged = take_aged_out();
    } catch (const std::bad_alloc&) { // they stay kept, and go with a later free
    }
    if (p != nullptr && retained_ + bytes <= cap_) {
      try {
        kept_.emplace(Shape{bytes, static_cast<std::size_t>(align)}, Kept{p, period_});
        retained_ += bytes;
        kept = true;
      } catch (const std::bad_alloc&) { // no node for it: give it back instead
      }
    }
  }
  for (auto& [shape, block] : aged) free_table(block, shape.first, std::align_val_t(shape.second));
  if (!kept) free_table(p, bytes, align);
}

std::vector<std::pair<RecycledMemory::Shape, void*>> RecycledMemory::take_aged_out() {
  std::vector<std::pair<Shape, void*>> aged;
  if (swept_period_ == period_) return aged; // swept already since the last age()
  // Kept in period p, a block was not taken in the whole periods p + 1 ... p + idle_periods.
  const auto idle = [this](const Kept& k) { return k.period + idle_periods + 1 <= period_; };
  // Room first: a bad_alloc then leaves every block kept, none lost between kept_ and `aged`.
  aged.reserve(static_cast<std::size_t>(
      std::count_if(kept_.begin(), kept_.end(), [&](const auto& entry) { return idle(entry.second); })));
  for (auto it = kept_.begin(); it != kept_.end();) {
    if (idle(it->second)) {
      aged.emplace_back(it->first, it->second.block);
      retained_ -= it->first.first;
      ++aged_out_;
      it = kept_.erase(it);
    } else {
      ++it;
    }
  }
  swept_period_ = period_;
  return aged;
}

std::size_t RecycledMemory::prepare(const std::vector<std::size_t>& sizes, std::align_val_t align,
                                    std::stop_token stop) {
  std::size_t kept = 0;
  for (std::size_t bytes : sizes) {
    if (stop.stop_requested()) break;
    if (bytes == 0) continue;
    {
      std::lock_guard lock(mutex_);
      if (retained_ + bytes > cap_) break;
    }
    void* p = nullptr;
    try {
      p = allocate_table(bytes, align);
      std::lock_guard lock(mutex_);
      if (retained_ + bytes <= cap_) { // copies freed meanwhile may have filled it
        kept_.emplace(Shape{bytes, static_cast<std::size_t>(align)}, Kept{p, period_});
        retained_ += bytes;
        kept += bytes;
        ++prepared_;
        continue;
      }
    } catch (const std::bad_alloc&) { // no memory to spare now: the copies will find their own
    }
    free_table(p, bytes, align);
    break;
  }
  return kept;
}

void RecycledMemory::age() {
  std::lock_guard lock(mutex_);
  ++period_;
}

std::size_t RecycledMemory::retained_bytes() const {
  std::lock_guard lock(mutex_);
  return retained_;
}

std::size_t RecycledMemory::reused() const {
  std::lock_guard lock(mutex_);
  return reused_;
}

std::size_t RecycledMemory::fresh() const {
  std::lock_guard lock(mutex_);
  return fresh_;
}

std::size_t RecycledMemory::prepared() const {
  std::lock_guard lock(mutex_);
  return prepared_;
}

std::size_t RecycledMemory::aged_out() const {
  std::lock_guard lock(mutex_);
  return aged_out_;
}

namespace {

// A quarter of the memory the kernel has free now: what a preparation may take at most. The
// copies would take that memory later anyway, but a restore that leaves little free must not
// be the one that runs the machine out of it for blocks that may never be used.
std::size_t spare_memory() {
  struct sysinfo info{};
  if (sysinfo(&info) != 0) return 0;
  return static_cast<std::size_t>(info.freeram) * info.mem_unit / 4;
}

} // namespace

std::jthread prepare_in_background(std::shared_ptr<RecycledMemory> memory, std::vector<std::size_t> sizes,
                                   std::align_val_t align) {
  std::size_t room = spare_memory();
  std::size_t n = 0;
  for (; n < sizes.size() && sizes[n] <= room; ++n) room -= sizes[n];
  sizes.resize(n);
  if (sizes.empty()) return {};
  return std::jthread([memory = std::move(memory), sizes = std::move(sizes), align](std::stop_token stop) {
    sched_param idle{};
    pthread_setschedparam(pthread_self(), SCHED_IDLE, &idle); // where refused, it runs as others do
    memory->prepare(sizes, align, stop);
  });
}

} // namespace streamctl::state
