#include "transport/message_pool.hpp"

#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

namespace streamctl::transport {

namespace {

// In front of the bytes of every block: its capacity and the pool it returns to (a
// shared_ptr, constructed in place, so that a block in flight keeps the free list alive).
struct Header {
  std::size_t capacity;
  std::shared_ptr<MessagePool::Shared> pool;
};
constexpr std::size_t kHeaderSize = (sizeof(Header) + 15) / 16 * 16; // keeps the data 16-aligned

Header* header_of(void* data) {
  return std::launder(reinterpret_cast<Header*>(static_cast<char*>(data) - kHeaderSize));
}

void free_block(Header* header) {
  header->~Header();
  std::free(header);
}

} // namespace

struct MessagePool::Shared {
  std::mutex mutex;
  std::vector<Header*> idle; // blocks whose header's pool is empty
  std::size_t cached = 0;

  ~Shared() {
    for (Header* h : idle) free_block(h);
  }

  // Called by ZeroMQ (any thread) when a message no longer needs its block.
  static void give_back(void* data, void* /*hint*/) {
    Header* header = header_of(data);
    std::shared_ptr<Shared> pool = std::move(header->pool);
    {
      std::lock_guard lock(pool->mutex);
      if (pool->idle.size() < pool->cached) {
        pool->idle.push_back(header);
        return;
      }
    }
    free_block(header);
  }
};

MessagePool::MessagePool(std::size_t cached) : shared_(std::make_shared<Shared>()) {
  shared_->cached = cached;
}

MessagePool::~MessagePool() {
  // Idle blocks go now (Shared frees them); blocks in flight when their messages are done.
  std::lock_guard lock(shared_->mutex);
  for (Header* h : shared_->idle) free_block(h);
  shared_->idle.clear();
  shared_->cached = 0;
}

char* MessagePool::acquire(std::size_t size) {
  Header* header = nullptr;
  {
    std::lock_guard lock(shared_->mutex);
    if (!shared_->idle.empty()) {
      header = shared_->idle.back();
      shared_->idle.pop_back();
    }
  }
  if (header != nullptr && header->capacity < size) {
    free_block(header);
    header = nullptr;
  }
  if (header == nullptr) {
    // Room to spare, so that a batch a little larger than the last reuses the block.
    const std::size_t capacity = size + size / 4;
    void* memory = std::malloc(kHeaderSize + capacity);
    if (memory == nullptr) throw std::bad_alloc();
    header = new (memory) Header{capacity, nullptr};
  }
  header->pool = shared_;
  return reinterpret_cast<char*>(header) + kHeaderSize;
}

zmq::message_t MessagePool::wrap(char* data, std::size_t size) {
  return zmq::message_t(data, size, &Shared::give_back, nullptr);
}

} // namespace streamctl::transport
