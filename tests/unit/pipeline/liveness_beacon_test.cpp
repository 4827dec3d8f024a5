#include <catch2/catch.hpp>

#include <chrono>

#include <zmq.hpp>

#include "pipeline/runtime/liveness_beacon.hpp"
#include "transport/control.hpp"

using namespace std::chrono_literals;
using streamctl::runtime::LivenessBeacon;

// Guards the fix for a job killed as "sent no heartbeat" while its task thread was busy
// firing 33 million windows: the beacon beats on its own thread, whatever the task does.
TEST_CASE("the liveness beacon beats on its own thread with its task and attempt until destroyed",
          "[liveness_beacon]") {
  zmq::context_t context;
  zmq::socket_t router(context, zmq::socket_type::router);
  router.set(zmq::sockopt::linger, 0);
  router.bind("inproc://coordinator");
  auto beacon = std::make_unique<LivenessBeacon>(context, "inproc://coordinator", 7, 3, 20ms);
  int beats = 0;
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (beats < 3 && std::chrono::steady_clock::now() < deadline) {
    zmq::pollitem_t items[] = {{router.handle(), 0, ZMQ_POLLIN, 0}};
    zmq::poll(items, 1, 100ms);
    zmq::message_t identity, body;
    if (!router.recv(identity, zmq::recv_flags::dontwait)) continue;
    REQUIRE(router.recv(body, zmq::recv_flags::dontwait));
    auto message = streamctl::transport::decode_control(body.to_string_view());
    REQUIRE(message);
    CHECK(message->type == "ALIVE");
    CHECK(message->get_int("task") == 7);
    CHECK(message->get_int("attempt") == 3);
    ++beats;
  }
  CHECK(beats == 3);
  auto start = std::chrono::steady_clock::now();
  beacon.reset(); // wakes the thread at once rather than after its interval
  CHECK(std::chrono::steady_clock::now() - start < 1s);
}
