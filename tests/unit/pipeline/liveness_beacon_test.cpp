#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>

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

namespace {

// Stands in for the coordinator: reads ALIVE from beacons and, while `answering`, replies
// ALIVE_OK to the beacon's identity as the coordinator does.
int serve_beacons(zmq::socket_t& router, bool answering, std::chrono::milliseconds for_how_long) {
  int beats = 0;
  auto deadline = std::chrono::steady_clock::now() + for_how_long;
  while (std::chrono::steady_clock::now() < deadline) {
    zmq::pollitem_t items[] = {{router.handle(), 0, ZMQ_POLLIN, 0}};
    zmq::poll(items, 1, 20ms);
    zmq::message_t identity, body;
    while (router.recv(identity, zmq::recv_flags::dontwait)) {
      REQUIRE(router.recv(body, zmq::recv_flags::dontwait));
      auto message = streamctl::transport::decode_control(body.to_string_view());
      REQUIRE(message);
      REQUIRE(message->type == "ALIVE");
      CHECK(identity.to_string() == streamctl::runtime::beacon_identity(2, 1));
      ++beats;
      if (!answering) continue;
      std::string ok = streamctl::transport::encode_control({"ALIVE_OK", {}});
      router.send(identity, zmq::send_flags::sndmore);
      router.send(zmq::buffer(ok));
    }
  }
  return beats;
}

} // namespace

// A cut link between hosts gives no EOF: a remote worker learns that its coordinator is gone
// only from the silence of its answers.
TEST_CASE("with a reply timeout, the beacon calls on_silence once the coordinator stops answering ALIVE",
          "[liveness_beacon]") {
  zmq::context_t context;
  zmq::socket_t router(context, zmq::socket_type::router);
  router.set(zmq::sockopt::linger, 0);
  router.bind("tcp://127.0.0.1:*");
  std::string endpoint = router.get(zmq::sockopt::last_endpoint);
  std::atomic<int> silences{0};
  std::atomic<std::chrono::steady_clock::rep> silent_at{0};
  LivenessBeacon beacon(context, endpoint, 2, 1, 50ms, 400ms, [&] {
    silent_at = std::chrono::steady_clock::now().time_since_epoch().count();
    ++silences;
  });
  // Answered for three times the timeout: no call.
  CHECK(serve_beacons(router, true, 1200ms) >= 10);
  CHECK(silences == 0);
  auto stopped_answering = std::chrono::steady_clock::now();
  serve_beacons(router, false, 3s);
  CHECK(silences == 1);
  auto after = std::chrono::steady_clock::duration(silent_at.load()) - stopped_answering.time_since_epoch();
  CHECK(after >= 350ms);
  CHECK(after < 2s);
}

TEST_CASE("with a reply timeout and no coordinator at all, the beacon calls on_silence after the timeout",
          "[liveness_beacon]") {
  zmq::context_t context;
  std::atomic<int> silences{0};
  auto start = std::chrono::steady_clock::now();
  std::atomic<std::chrono::steady_clock::rep> silent_at{0};
  {
    LivenessBeacon beacon(context, "tcp://127.0.0.1:1", 2, 1, 50ms, 300ms, [&] {
      silent_at = std::chrono::steady_clock::now().time_since_epoch().count();
      ++silences;
    });
    auto deadline = start + 5s;
    while (silences == 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
  }
  CHECK(silences == 1);
  auto after = std::chrono::steady_clock::duration(silent_at.load()) - start.time_since_epoch();
  CHECK(after >= 300ms);
}

TEST_CASE("without a reply timeout, a coordinator that never answers is not a silence", "[liveness_beacon]") {
  zmq::context_t context;
  zmq::socket_t router(context, zmq::socket_type::router);
  router.set(zmq::sockopt::linger, 0);
  router.bind("tcp://127.0.0.1:*");
  std::atomic<int> silences{0};
  {
    LivenessBeacon beacon(context, router.get(zmq::sockopt::last_endpoint), 2, 1, 50ms, 0ms, [&] { ++silences; });
    CHECK(serve_beacons(router, false, 800ms) >= 5);
  }
  CHECK(silences == 0);
}
