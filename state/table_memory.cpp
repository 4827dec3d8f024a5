#include "state/table_memory.hpp"

#include <cstdint>
#include <cstring>
#include <mutex>
#include <sys/mman.h>
#include <unordered_set>
#include <unistd.h>

namespace streamctl::state {

namespace {

constexpr std::size_t huge_page = std::size_t{2} << 20;
constexpr std::size_t small_page = 4096;

constexpr std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

// A mapping of `length` (a multiple of small_page) that starts on a huge page boundary, so
// that every whole 2 MiB of it can be one huge page.
void* map_aligned(std::size_t length) {
  const std::size_t reserve = length + huge_page;
  void* raw = ::mmap(nullptr, reserve, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto start = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = round_up(start, huge_page);
  if (aligned > start) ::munmap(raw, aligned - start);
  const std::uintptr_t end = start + reserve;
  if (end > aligned + length) ::munmap(reinterpret_cast<void*>(aligned + length), end - (aligned + length));
  return reinterpret_cast<void*>(aligned);
}

// Large blocks that came from operator new after mmap failed (vm.max_map_count reached, say:
// each large table is a mapping of its own): rare, so a set under a lock is enough.
std::mutex fallback_mutex;
std::unordered_set<void*>& fallbacks() {
  static std::unordered_set<void*> set;
  return set;
}

} // namespace

namespace {

struct Block {
  void* p;
  bool zeroed; // fresh pages from mmap
};

Block allocate(std::size_t bytes, std::align_val_t align) {
  if (bytes < large_table_bytes || static_cast<std::size_t>(align) > small_page)
    return {::operator new(bytes, align), false};
  const std::size_t length = round_up(bytes, small_page);
  void* p = map_aligned(length);
  if (p == nullptr) {
    void* q = ::operator new(bytes, align);
    std::lock_guard lock(fallback_mutex);
    try {
      fallbacks().insert(q);
    } catch (...) {
      ::operator delete(q, align);
      throw;
    }
    return {q, false};
  }
  // Advice only: a kernel without THP, or one that cannot populate now (memory is short),
  // leaves plain pages that fault in as they are touched.
  (void)::madvise(p, length, MADV_HUGEPAGE);
#ifdef MADV_POPULATE_WRITE
  (void)::madvise(p, length, MADV_POPULATE_WRITE);
#endif
  return {p, true};
}

} // namespace

void* allocate_table(std::size_t bytes, std::align_val_t align) { return allocate(bytes, align).p; }

void* allocate_zeroed_table(std::size_t bytes, std::align_val_t align) {
  const Block b = allocate(bytes, align);
  if (!b.zeroed) std::memset(b.p, 0, bytes);
  return b.p;
}

void free_table(void* p, std::size_t bytes, std::align_val_t align) noexcept {
  if (p == nullptr) return;
  if (bytes < large_table_bytes || static_cast<std::size_t>(align) > small_page) {
    ::operator delete(p, align);
    return;
  }
  {
    std::lock_guard lock(fallback_mutex);
    if (fallbacks().erase(p) != 0) {
      ::operator delete(p, align);
      return;
    }
  }
  ::munmap(p, round_up(bytes, small_page));
}

} // namespace streamctl::state
