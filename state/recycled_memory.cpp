#include "state/recycled_memory.hpp"

#include "state/table_memory.hpp"

namespace streamctl::state {

RecycledMemory::~RecycledMemory() {
  for (auto& [shape, p] : kept_) free_table(p, shape.first, std::align_val_t(shape.second));
}

void* RecycledMemory::allocate(std::size_t bytes, std::align_val_t align) {
  const Shape shape{bytes, static_cast<std::size_t>(align)};
  {
    std::lock_guard lock(mutex_);
    if (auto it = kept_.find(shape); it != kept_.end()) {
      void* p = it->second;
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
  if (p == nullptr) return;
  {
    std::lock_guard lock(mutex_);
    if (retained_ + bytes <= cap_) {
      try {
        kept_.emplace(Shape{bytes, static_cast<std::size_t>(align)}, p);
        retained_ += bytes;
        return;
      } catch (const std::bad_alloc&) { // no node for it: give it back instead
      }
    }
  }
  free_table(p, bytes, align);
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

} // namespace streamctl::state
