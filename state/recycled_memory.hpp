#pragma once
// RecycledMemory: a SlotMemory (state/keyed_map.hpp) that keeps what is freed, up to a cap, and
// hands it out again for an allocation of the same size and alignment.
//
// Deferred snapshots copy key groups' tables at every checkpoint (copy-on-first-write,
// state/frozen_key_groups.hpp), and free each copy once the writer has serialised it. From
// operator new, each copy lands on fresh pages, which the kernel faults in and zeroes: at 100 MB
// of window state, zeroing took 15% of the run's CPU and most of the task's stall after the
// barrier, against 3% for the copying itself (perf, tests/bench/checkpoint.py --snapshot
// deferred). Tables have power-of-two capacities, so the sizes repeat from one checkpoint to
// the next, and a kept block is reused whole.
//
// Memory: at most `cap` bytes are kept (beyond it a freed block goes back to operator delete);
// retained_bytes() says how much is.
//
// Thread-safe: blocks are allocated on the task's thread and freed on the writer's.

#include <cstddef>
#include <map>
#include <mutex>
#include <new>
#include <utility>

#include "state/keyed_map.hpp"

namespace streamctl::state {

class RecycledMemory final : public SlotMemory {
public:
  explicit RecycledMemory(std::size_t cap) : cap_(cap) {}
  RecycledMemory(const RecycledMemory&) = delete;
  RecycledMemory& operator=(const RecycledMemory&) = delete;
  ~RecycledMemory() override;

  void* allocate(std::size_t bytes, std::align_val_t align) override;
  void free(void* p, std::size_t bytes, std::align_val_t align) noexcept override;

  std::size_t retained_bytes() const;
  // Allocations served from kept blocks, and fresh (allocate_table).
  std::size_t reused() const;
  std::size_t fresh() const;

private:
  using Shape = std::pair<std::size_t, std::size_t>; // bytes, alignment

  const std::size_t cap_;
  mutable std::mutex mutex_;
  std::multimap<Shape, void*> kept_; // under mutex_
  std::size_t retained_ = 0;         // under mutex_
  std::size_t reused_ = 0;           // under mutex_
  std::size_t fresh_ = 0;            // under mutex_
};

} // namespace streamctl::state
