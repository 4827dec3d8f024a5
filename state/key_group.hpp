#pragma once
// Key groups (SPEC §3, ARCHITECTURE "State, checkpoints, rescale"): the unit in which keyed
// state is partitioned, snapshotted and redistributed on rescale.
//
//   hash      = hash_key_bytes(encode_key(key values))       (key_codec.hpp)
//   key group = hash % max_parallelism
//   subtask i of p owns the key groups [i*maxP/p, (i+1)*maxP/p)  (integer division)
//
// The hash is written into snapshots and decides which subtask owns a key across runs, machines
// and builds, so it must never change: it is XXH3-64 (xxHash 0.8 and later, whose output is
// frozen) with seed 0, and tests/unit/state/key_group_test.cpp pins known values.
//
// Everything here is a pure function, safe to call from any thread.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace streamctl::state {

// Reports a violated precondition (a programming error, never bad input) and aborts. Used by
// STREAMCTL_STATE_ASSERT, which stays on in Release builds: the checks it guards are one
// compare on paths that already do far more work.
[[noreturn]] void state_assertion_failed(const char* condition, const char* reason,
                                         const char* file, int line);

#define STREAMCTL_STATE_ASSERT(condition, reason)                                                  \
  ((condition)                                                                                     \
       ? static_cast<void>(0)                                                                      \
       : ::streamctl::state::state_assertion_failed(#condition, reason, __FILE__, __LINE__))

// The largest max_parallelism accepted (Flink's limit too): key groups fit comfortably in
// 16 bits of a snapshot's index, and per-group tables stay affordable.
inline constexpr std::uint32_t max_key_groups = 32768;

// XXH3-64, seed 0, of an encoded key. Stable forever (see above).
std::uint64_t hash_key_bytes(std::string_view encoded);

inline std::uint32_t key_group_of(std::uint64_t hash, std::uint32_t max_parallelism) {
  return static_cast<std::uint32_t>(hash % max_parallelism);
}

// key_group_of() for one max_parallelism, by a mask when it is a power of two (the default,
// 128): a 64-bit division costs more than the rest of the arithmetic of a keyed operator's
// state update, and they make two or three of them per record. Same results as key_group_of.
class KeyGroupOf {
public:
  explicit KeyGroupOf(std::uint32_t max_parallelism)
      : max_parallelism_(max_parallelism),
        power_of_two_((max_parallelism & (max_parallelism - 1)) == 0) {}
  std::uint32_t operator()(std::uint64_t hash) const {
    return power_of_two_ ? static_cast<std::uint32_t>(hash & (max_parallelism_ - 1))
                         : key_group_of(hash, max_parallelism_);
  }
  std::uint32_t max_parallelism() const { return max_parallelism_; }

private:
  std::uint32_t max_parallelism_;
  bool power_of_two_;
};

// A contiguous range [first, end) of key groups.
struct KeyGroupRange {
  std::uint32_t first = 0;
  std::uint32_t end = 0;

  bool contains(std::uint32_t key_group) const { return key_group >= first && key_group < end; }
  std::uint32_t size() const { return end - first; }
  bool empty() const { return end == first; }
  bool operator==(const KeyGroupRange&) const = default;
};

// The key groups subtask `subtask` of `parallelism` owns: [i*maxP/p, (i+1)*maxP/p).
// Requires 0 <= subtask < parallelism <= max_parallelism <= max_key_groups; every subtask then
// owns at least one group, and the ranges of all subtasks tile [0, max_parallelism).
KeyGroupRange key_group_range(int subtask, int parallelism, std::uint32_t max_parallelism);

// The subtask of `parallelism` that owns `key_group`: the exact inverse of key_group_range.
int subtask_for_key_group(std::uint32_t key_group, int parallelism, std::uint32_t max_parallelism);

} // namespace streamctl::state
