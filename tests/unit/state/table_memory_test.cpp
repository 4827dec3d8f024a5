#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "state/key_codec.hpp"
#include "state/key_group.hpp"
#include "state/keyed_map.hpp"
#include "state/table_memory.hpp"

using namespace streamctl::state;

TEST_CASE("table memory of every size holds what is written to all of it", "[state][table_memory]") {
  // Below, at and above the size where blocks come from mmap; sizes that are not whole pages.
  for (std::size_t bytes : {std::size_t{64}, std::size_t{4096}, large_table_bytes - 64, large_table_bytes,
                            large_table_bytes + 64, 3 * large_table_bytes + 4096 + 192, 9 * large_table_bytes}) {
    for (std::size_t align : {std::size_t{64}, std::size_t{4096}}) {
      INFO("bytes " << bytes << ", align " << align);
      auto* p = static_cast<unsigned char*>(allocate_table(bytes, std::align_val_t(align)));
      REQUIRE(p != nullptr);
      CHECK(reinterpret_cast<std::uintptr_t>(p) % align == 0);
      for (std::size_t i = 0; i < bytes; ++i) p[i] = static_cast<unsigned char>(i * 7 + 1);
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < bytes; ++i) wrong += p[i] != static_cast<unsigned char>(i * 7 + 1);
      CHECK(wrong == 0);
      free_table(p, bytes, std::align_val_t(align));
    }
  }
  free_table(nullptr, large_table_bytes, std::align_val_t(64)); // ignored, as operator delete's
}

TEST_CASE("a large block starts on a huge page boundary and is zeroed", "[state][table_memory]") {
  const std::size_t bytes = 2 * large_table_bytes + 4096;
  auto* p = static_cast<unsigned char*>(allocate_table(bytes, std::align_val_t(64)));
  CHECK(reinterpret_cast<std::uintptr_t>(p) % large_table_bytes == 0);
  std::size_t nonzero = 0;
  for (std::size_t i = 0; i < bytes; ++i) nonzero += p[i] != 0;
  CHECK(nonzero == 0);
  free_table(p, bytes, std::align_val_t(64));
}

TEST_CASE("a zeroed block is zero at every size, also where memory was used before", "[state][table_memory]") {
  for (std::size_t bytes : {std::size_t{64}, std::size_t{4096} + 64, large_table_bytes - 64, large_table_bytes,
                            3 * large_table_bytes + 192}) {
    INFO("bytes " << bytes);
    for (int round = 0; round < 3; ++round) { // the allocator hands back what was freed, dirty
      auto* p = static_cast<unsigned char*>(allocate_zeroed_table(bytes, std::align_val_t(64)));
      REQUIRE(p != nullptr);
      std::size_t nonzero = 0;
      for (std::size_t i = 0; i < bytes; ++i) nonzero += p[i] != 0;
      CHECK(nonzero == 0);
      std::memset(p, 0xA5, bytes);
      free_table(p, bytes, std::align_val_t(64));
    }
  }
}

TEST_CASE("KeyedMap with key group tables of many megabytes grows, erases and frees them", "[state][table_memory]") {
  // One key group of 200,000 entries: its table is several MB, from mmap, and grows through
  // tables on both sides of large_table_bytes.
  KeyedMap<std::uint64_t> map({0, 1}, 1);
  FieldNames names;
  std::vector<std::string> keys;
  for (std::int64_t k = 0; k < 200000; ++k) {
    Value v = Value::integer(k);
    std::string bytes;
    encode_key(std::span<const Value>(&v, 1), names, bytes);
    keys.push_back(bytes);
    auto [value, inserted] = map.try_emplace(bytes, hash_key_bytes(bytes), static_cast<std::uint64_t>(k) * 3);
    REQUIRE(inserted);
    (void)value;
  }
  CHECK(map.size() == keys.size());
  for (std::size_t k = 0; k < keys.size(); k += 2) CHECK(map.erase(keys[k], hash_key_bytes(keys[k])));
  std::size_t found = 0, right = 0;
  for (std::size_t k = 0; k < keys.size(); ++k) {
    const std::uint64_t* v = map.find(keys[k], hash_key_bytes(keys[k]));
    found += v != nullptr;
    right += v != nullptr && *v == k * 3 && k % 2 == 1;
  }
  CHECK(found == keys.size() / 2);
  CHECK(right == keys.size() / 2);

  // A group reserved at once, then moved into another map (a restore's path).
  KeyedMap<std::uint64_t> built({0, 1}, 1);
  built.reserve_group(0, 300000);
  for (std::size_t k = 0; k < 1000; ++k) built.try_emplace(keys[k], hash_key_bytes(keys[k]), k);
  KeyedMap<std::uint64_t> target({0, 1}, 1);
  target.adopt_group(0, built);
  CHECK(target.size() == 1000);
  CHECK(*target.find(keys[999], hash_key_bytes(keys[999])) == 999);
}

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

TEST_CASE("where mmap fails a large block comes from operator new and is freed as such", "[state][table_memory]") {
  // In a child whose address space is capped 3.5 MiB above what it maps now: the 4 MiB
  // mapping (the block and its alignment margin) fails, operator new's 2 MiB block fits.
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    void* warm = ::operator new(large_table_bytes, std::align_val_t(64)); // glibc's mmap path, then freed
    ::operator delete(warm, std::align_val_t(64));
    long pages = 0, resident = 0;
    if (FILE* f = std::fopen("/proc/self/statm", "r")) {
      if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) _exit(3);
      std::fclose(f);
    }
    const rlim_t cap = static_cast<rlim_t>(pages) * 4096 + large_table_bytes + 3 * (large_table_bytes / 4);
    struct rlimit limit{cap, cap};
    if (::setrlimit(RLIMIT_AS, &limit) != 0) _exit(4);
    void* p = nullptr;
    try {
      p = allocate_table(large_table_bytes, std::align_val_t(64));
    } catch (const std::bad_alloc&) {
      _exit(5);
    }
    auto* bytes = static_cast<unsigned char*>(p);
    for (std::size_t i = 0; i < large_table_bytes; i += 4096) bytes[i] = 1;
    const bool mapped = reinterpret_cast<std::uintptr_t>(p) % large_table_bytes == 0;
    // operator delete: a munmap of a heap block would tear glibc's heap, which the
    // allocations after it would meet.
    free_table(p, large_table_bytes, std::align_val_t(64));
    std::vector<std::string> after;
    for (int k = 0; k < 1000; ++k) after.emplace_back(static_cast<std::size_t>(100 + k), 'x');
    _exit(mapped ? 6 : 0);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
#endif
