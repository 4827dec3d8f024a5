#include "state/key_group.hpp"

#include <cstdio>
#include <cstdlib>

// The hash of every key of every record: xxHash compiled in here (XXH_INLINE_ALL, the same
// algorithm and results as the shared library's), so that a short key takes XXH3's path for
// its length directly, not a call through the PLT into the library's dispatch.
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace streamctl::state {

void state_assertion_failed(const char* condition, const char* reason, const char* file, int line) {
  std::fprintf(stderr, "%s:%d: internal error: %s (%s)\n", file, line, reason, condition);
  std::fflush(stderr);
  std::abort();
}

std::uint64_t hash_key_bytes(std::string_view encoded) {
  // XXH3_64bits is XXH3_64bits_withSeed(.., 0); spelled out because the seed is part of the
  // format.
  return XXH3_64bits_withSeed(encoded.data(), encoded.size(), 0);
}

namespace {

void check_parallelism(int parallelism, std::uint32_t max_parallelism) {
  STREAMCTL_STATE_ASSERT(max_parallelism >= 1 && max_parallelism <= max_key_groups,
                         "max_parallelism must be in [1, 32768]");
  STREAMCTL_STATE_ASSERT(parallelism >= 1 &&
                             static_cast<std::uint32_t>(parallelism) <= max_parallelism,
                         "parallelism must be in [1, max_parallelism]");
}

} // namespace

KeyGroupRange key_group_range(int subtask, int parallelism, std::uint32_t max_parallelism) {
  check_parallelism(parallelism, max_parallelism);
  STREAMCTL_STATE_ASSERT(subtask >= 0 && subtask < parallelism,
                         "subtask must be in [0, parallelism)");
  const std::uint64_t m = max_parallelism;
  const std::uint64_t p = static_cast<std::uint64_t>(parallelism);
  const std::uint64_t i = static_cast<std::uint64_t>(subtask);
  return KeyGroupRange{static_cast<std::uint32_t>(i * m / p),
                       static_cast<std::uint32_t>((i + 1) * m / p)};
}

int subtask_for_key_group(std::uint32_t key_group, int parallelism, std::uint32_t max_parallelism) {
  check_parallelism(parallelism, max_parallelism);
  STREAMCTL_STATE_ASSERT(key_group < max_parallelism, "key group must be < max_parallelism");
  // Subtask i owns kg iff floor(i*m/p) <= kg < floor((i+1)*m/p). The first condition is
  // i*m < (kg+1)*p, i.e. i <= ((kg+1)*p - 1) / m; the owner is the largest such i, for which
  // the second condition then holds.
  const std::uint64_t m = max_parallelism;
  const std::uint64_t p = static_cast<std::uint64_t>(parallelism);
  return static_cast<int>(((key_group + std::uint64_t{1}) * p - 1) / m);
}

} // namespace streamctl::state
