#pragma once
// A bump allocator for the bytes and nested values of a batch. Allocations never move and are
// freed together when the arena dies, so values can point into it with raw pointers.
// Not thread-safe: an arena is filled by one thread, then only read.

#include <cstddef>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

namespace streamctl::state {

class Arena {
public:
  explicit Arena(std::size_t first_chunk = 16 * 1024) : next_chunk_(first_chunk) {}
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  void* allocate(std::size_t bytes, std::size_t align = alignof(std::max_align_t)) {
    std::size_t offset = (used_ + align - 1) & ~(align - 1);
    if (current_ == nullptr || offset + bytes > capacity_) {
      grow(bytes + align);
      offset = (used_ + align - 1) & ~(align - 1);
    }
    used_ = offset + bytes;
    return current_ + offset;
  }

  template <typename T> T* allocate_array(std::size_t n) {
    return static_cast<T*>(allocate(sizeof(T) * n, alignof(T)));
  }

  std::string_view copy(std::string_view s) {
    if (s.empty()) return {};
    char* p = static_cast<char*>(allocate(s.size(), 1));
    std::memcpy(p, s.data(), s.size());
    return {p, s.size()};
  }

  std::size_t bytes_reserved() const { return reserved_; }

  // Forgets every allocation but keeps the newest chunk for reuse (scratch arenas).
  void reset() {
    if (chunks_.size() > 1) {
      auto last = std::move(chunks_.back());
      chunks_.clear();
      chunks_.push_back(std::move(last));
      reserved_ = capacity_;
    }
    used_ = 0;
  }

private:
  void grow(std::size_t at_least) {
    std::size_t size = next_chunk_ > at_least ? next_chunk_ : at_least;
    // Not make_unique<char[]>: it would zero-fill every chunk, and arenas are made per batch.
    chunks_.push_back(std::unique_ptr<char[]>(new char[size]));
    current_ = chunks_.back().get();
    capacity_ = size;
    used_ = 0;
    reserved_ += size;
    if (next_chunk_ < 1024 * 1024) next_chunk_ *= 2;
  }

  std::vector<std::unique_ptr<char[]>> chunks_;
  char* current_ = nullptr;
  std::size_t capacity_ = 0;
  std::size_t used_ = 0;
  std::size_t next_chunk_;
  std::size_t reserved_ = 0;
};

} // namespace streamctl::state
