#include <catch2/catch.hpp>

#include <cstring>
#include <optional>
#include <string>

#include "transport/message_pool.hpp"

using namespace streamctl::transport;

TEST_CASE("message pool: a block comes back for reuse once its message is done", "[transport]") {
  MessagePool pool;
  char* first = pool.acquire(1000);
  std::memset(first, 'a', 1000);
  {
    zmq::message_t message = pool.wrap(first, 600);
    CHECK(message.size() == 600);
    CHECK(message.data() == first); // the block itself, not a copy
  } // dropped unsent: the block returns
  CHECK(pool.acquire(800) == first);
  // A request larger than any idle block gets a new one.
  zmq::message_t keep = pool.wrap(first, 1);
  char* larger = pool.acquire(100000);
  CHECK(larger != first);
  std::memset(larger, 'b', 100000); // the whole size is writable
  zmq::message_t big = pool.wrap(larger, 100000);
}

TEST_CASE("message pool: messages sent through ZeroMQ arrive whole and return their block",
          "[transport]") {
  zmq::context_t context;
  zmq::socket_t in(context, zmq::socket_type::pair);
  zmq::socket_t out(context, zmq::socket_type::pair);
  in.bind("inproc://message-pool-test");
  out.connect("inproc://message-pool-test");
  MessagePool pool;
  char* block = nullptr;
  for (int round = 0; round < 3; ++round) {
    const std::string text = "round " + std::to_string(round) + std::string(5000, 'x');
    char* data = pool.acquire(text.size());
    if (block != nullptr) CHECK(data == block); // the block of the previous round, received and dropped
    block = data;
    std::memcpy(data, text.data(), text.size());
    zmq::message_t message = pool.wrap(data, text.size());
    REQUIRE(out.send(message, zmq::send_flags::none));
    zmq::message_t received;
    REQUIRE(in.recv(received, zmq::recv_flags::none));
    CHECK(received.to_string() == text);
  }
}

TEST_CASE("message pool: a message may outlive its pool", "[transport]") {
  std::optional<zmq::message_t> message;
  {
    MessagePool pool;
    char* data = pool.acquire(64);
    std::memcpy(data, "still here", 10);
    message.emplace(pool.wrap(data, 10));
  }
  CHECK(message->to_string() == "still here");
  message.reset(); // frees the block and what the pool shared with it
}
