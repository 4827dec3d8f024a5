#pragma once
// Reusable memory for outgoing data messages. A batch is encoded straight into a block and
// ZeroMQ sends the block as it is (zmq_msg_init_data); once its I/O thread has written it, the
// block comes back here instead of to the allocator. Fresh blocks of a hundred kilobytes
// each cost page faults and cold caches on both threads (the kernel zeroes every new page and
// the I/O thread copies from memory no cache holds); a few blocks in rotation stay mapped and
// warm.
//
// Thread-safety: acquire() and wrap() are called by the one thread that owns the pool; blocks
// return from ZeroMQ's I/O threads, under a mutex. Messages may outlive the pool: the memory
// they share is freed when both the pool and the last message are gone.

#include <cstddef>
#include <memory>

#include <zmq.hpp>

namespace streamctl::transport {

class MessagePool {
public:
  // Keeps at most `cached` idle blocks; beyond that, returned blocks are freed.
  explicit MessagePool(std::size_t cached = 16);
  ~MessagePool();
  MessagePool(const MessagePool&) = delete;
  MessagePool& operator=(const MessagePool&) = delete;

  // Memory for at least `size` bytes, to fill and then pass to wrap(). Throws std::bad_alloc.
  char* acquire(std::size_t size);
  // A message of the first `size` bytes of `data` (from acquire(), filled); the block returns
  // to the pool once ZeroMQ is done with it, or when the message is dropped unsent.
  zmq::message_t wrap(char* data, std::size_t size);

  struct Shared;

private:
  std::shared_ptr<Shared> shared_;
};

} // namespace streamctl::transport
