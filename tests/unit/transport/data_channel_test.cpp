#include <catch2/catch.hpp>

#include <thread>

#include "transport/data_channel.hpp"

using namespace streamctl::transport;

TEST_CASE("an output channel blocks (try_send fails) when the peer's queue is full", "[transport]") {
  zmq::context_t context;
  InputGate gate(context, "tcp://127.0.0.1:*");
  REQUIRE(gate.endpoint().rfind("tcp://127.0.0.1:", 0) == 0);
  OutputChannel out(context, gate.endpoint(), 7, 0);

  // Nobody reads: after a bounded number of messages the channel refuses more.
  int sent = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  std::string payload(64 * 1024, 'x');
  int refused_in_a_row = 0;
  while (std::chrono::steady_clock::now() < deadline && refused_in_a_row < 50) {
    zmq::message_t m(payload.data(), payload.size());
    if (out.try_send(m)) {
      ++sent;
      refused_in_a_row = 0;
    } else {
      ++refused_in_a_row;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  CHECK(refused_in_a_row >= 50);
  CHECK(sent >= kQueueBatches);
  CHECK(sent < 1000); // bounded: backpressure, not an unbounded queue

  // Reading makes room again, and everything sent arrives, in order.
  int received = 0;
  zmq::message_t m;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (received < sent && std::chrono::steady_clock::now() < until) {
    if (gate.try_receive(m)) ++received;
    else std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  CHECK(received == sent);
  zmq::message_t again(payload.data(), payload.size());
  CHECK(out.try_send(again));
}
