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
// retained_bytes() says how much is. The pool follows what the checkpoints use: the owner calls
// age() at each barrier, and a block that stays kept through `idle_periods` whole periods
// between barriers is released (by the next free() after that, on the writer's thread, so that
// the task never waits for the kernel to take the pages back). Not after one: rolling
// checkpoints write slices of 12 and 13 groups in turn, and a block kept for the larger slices
// aged out after each smaller one and was fresh memory again at the next (30 ms of the task).
//
// After a restore every table is new and nothing is kept yet, so the first checkpoint's copies
// would all land on fresh pages: 227 MB of them held the task 450 ms at 1 GB of window state,
// against 35 ms for the same copies a checkpoint later (in this VM a page touched for the first
// time is expensive; clear_page_erms was most of it). prepare() fills the pool ahead, on a
// thread of the owner's, with blocks of the shapes the copies will ask for; what the first
// checkpoints do not use ages out.
//
// Thread-safe: blocks are allocated on the task's thread, prepared on another and freed on the
// writer's.

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <stop_token>
#include <thread>
#include <utility>
#include <vector>

#include "state/keyed_map.hpp"

namespace streamctl::state {

class RecycledMemory final : public SlotMemory {
public:
  static constexpr std::uint64_t idle_periods = 4;

  explicit RecycledMemory(std::size_t cap) : cap_(cap) {}
  RecycledMemory(const RecycledMemory&) = delete;
  RecycledMemory& operator=(const RecycledMemory&) = delete;
  ~RecycledMemory() override;

  void* allocate(std::size_t bytes, std::align_val_t align) override;
  void free(void* p, std::size_t bytes, std::align_val_t align) noexcept override;

  // Keeps a fresh block (allocate_table: a large one comes with its pages populated) for each
  // of `sizes`, in order, with `align`, until the next would pass the cap or `stop` is
  // requested. Slow (the kernel fills the pages): for a thread that the task does not wait for.
  // Returns the bytes it kept.
  std::size_t prepare(const std::vector<std::size_t>& sizes, std::align_val_t align, std::stop_token stop = {});
  // Begins a new period (the owner calls it at each barrier): blocks kept through the last
  // idle_periods whole periods are released by the next free().
  void age();

  std::size_t retained_bytes() const;
  // Allocations served from kept blocks, and fresh (allocate_table).
  std::size_t reused() const;
  std::size_t fresh() const;
  // Blocks prepare() kept, and blocks released by age().
  std::size_t prepared() const;
  std::size_t aged_out() const;

private:
  using Shape = std::pair<std::size_t, std::size_t>; // bytes, alignment
  struct Kept {
    void* block;
    std::uint64_t period; // when it was kept (period_)
  };
  // Takes the blocks kept through the last idle_periods periods out of kept_ (under mutex_);
  // the caller frees them after unlocking.
  std::vector<std::pair<Shape, void*>> take_aged_out();

  const std::size_t cap_;
  mutable std::mutex mutex_;
  std::multimap<Shape, Kept> kept_;   // under mutex_
  std::size_t retained_ = 0;          // under mutex_
  std::uint64_t period_ = 0;          // under mutex_: age() calls so far
  std::uint64_t swept_period_ = 0;    // under mutex_: the period of the last take_aged_out
  std::size_t reused_ = 0;            // under mutex_
  std::size_t fresh_ = 0;             // under mutex_
  std::size_t prepared_ = 0;          // under mutex_
  std::size_t aged_out_ = 0;          // under mutex_
};

// Starts memory->prepare(sizes, align) on a thread of its own, scheduled SCHED_IDLE (only on a
// core that nothing else wants: the task, the writer and the coordinator come first), for as
// many of `sizes` as fit in a quarter of the memory the kernel has free now (none: no thread).
// The thread is asked to stop, and joined, when the returned jthread goes.
std::jthread prepare_in_background(std::shared_ptr<RecycledMemory> memory, std::vector<std::size_t> sizes,
                                   std::align_val_t align);

} // namespace streamctl::state
