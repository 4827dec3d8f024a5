#pragma once
// Memory for the slot arrays of hash tables (state/keyed_map.hpp): a key group's table is
// megabytes at scale, and a restore or a growing table writes every byte of a fresh one.
//
// From operator new, such a block is fresh pages that the kernel hands out one fault at a
// time as they are first touched (in a VM each fault is also a trap to the hypervisor): a
// restore of 10 million windows spent more time faulting in its tables than decoding them,
// although workers already ask glibc for transparent huge pages (GLIBC_TUNABLES
// glibc.malloc.hugetlb=1). So a block of at least large_table_bytes comes from mmap instead,
// aligned to 2 MiB, marked for huge pages (MADV_HUGEPAGE: Debian's kernels back only marked
// memory, and not every process of ours runs with that tunable) and populated in one call
// (MADV_POPULATE_WRITE, Linux 5.14): the kernel fills the table's pages in a loop of its own,
// without a fault per page. Where the kernel refuses either, the block is still good: plain
// pages, faulted in as they are touched; where mmap fails, operator new. Smaller blocks come
// from operator new as before.
//
// Thread-safe (the kernel's and operator new's).

#include <cstddef>
#include <new>

namespace streamctl::state {

inline constexpr std::size_t large_table_bytes = std::size_t{2} << 20;

// `bytes` with `align` (at most a page); throws std::bad_alloc when there is no memory.
void* allocate_table(std::size_t bytes, std::align_val_t align);
// The same, every byte zero: a block from mmap is fresh pages, zero already (a restore then
// writes each byte of a table once, not twice); a smaller one is cleared.
void* allocate_zeroed_table(std::size_t bytes, std::align_val_t align);
// A block of allocate_table or allocate_zeroed_table with the same bytes and align; nullptr is
// ignored.
void free_table(void* p, std::size_t bytes, std::align_val_t align) noexcept;

} // namespace streamctl::state
