#pragma once
// A growable byte buffer for scratch work on hot paths: grow(n) hands out n bytes that are not
// initialised, where std::string::resize writes zeros over them through an out-of-line call
// (in C++20; resize_and_overwrite is C++23). A keyed operator writes every record's key into
// one: three such calls per record were 4% of a keyed count (perf, 2026-12-06).
//
// Not thread-safe. Pointers into it stay valid until the next grow().

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <string_view>

namespace streamctl::state {

class ByteScratch {
public:
  // n more bytes at the end, their contents undefined; returns where they start.
  char* grow(std::size_t n) {
    if (size_ + n > capacity_) reallocate(size_ + n);
    char* p = data_.get() + size_;
    size_ += n;
    return p;
  }
  // Keeps the first n bytes (n <= size()).
  void truncate(std::size_t n) { size_ = std::min(size_, n); }
  void clear() { size_ = 0; }

  char* data() { return data_.get(); }
  const char* data() const { return data_.get(); }
  std::size_t size() const { return size_; }
  std::string_view view() const { return {data_.get(), size_}; }

private:
  void reallocate(std::size_t at_least) {
    const std::size_t capacity = std::max({at_least, 2 * capacity_, std::size_t{256}});
    auto bigger = std::make_unique_for_overwrite<char[]>(capacity);
    if (size_ != 0) std::memcpy(bigger.get(), data_.get(), size_);
    data_ = std::move(bigger);
    capacity_ = capacity;
  }

  std::unique_ptr<char[]> data_;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
};

} // namespace streamctl::state
