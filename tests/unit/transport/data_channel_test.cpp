#include <catch2/catch.hpp>

#include <thread>

#include "transport/data_channel.hpp"
#include "transport/zap_handler.hpp"
#include "unit/transport/security_fixture.hpp"

using namespace streamctl::transport;

TEST_CASE("an output channel blocks (try_send fails) when the peer's queue is full",
          "[transport]") {
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
    if (gate.try_receive(m))
      ++received;
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  CHECK(received == sent);
  zmq::message_t again(payload.data(), payload.size());
  CHECK(out.try_send(again));
}

TEST_CASE("an encrypted gate takes batches from the job's channels only", "[transport][curve]") {
  zmq::context_t context;
  LinkSecurity job = LinkSecurity::generate();
  streamctl::testing::RefusalLog refusals;
  ZapHandler zap(context, job, refusals.callback());
  InputGate gate(context, "tcp://127.0.0.1:*", job, refusals.callback());

  // A channel from outside the job: it knows the gate's address and public key, not the
  // client key. Its batch never arrives, and both handshakes are reported.
  LinkSecurity outsider = LinkSecurity::generate();
  outsider.server.public_key = job.server.public_key;
  OutputChannel intruder(context, gate.endpoint(), 1, 0, outsider);
  OutputChannel plain(context, gate.endpoint(), 2, 0);
  // Their batches stay queued forever: without this the context's end would wait out the
  // channels' 30 s linger.
  intruder.socket().set(zmq::sockopt::linger, 0);
  plain.socket().set(zmq::sockopt::linger, 0);
  zmq::message_t stolen("stolen", 6);
  REQUIRE(intruder.try_send(stolen));
  zmq::message_t unencrypted("plain", 5);
  REQUIRE(plain.try_send(unencrypted));
  REQUIRE(streamctl::testing::eventually([&] { return refusals.size() >= 2; }));

  OutputChannel member(context, gate.endpoint(), 3, 0, job);
  zmq::message_t batch("batch", 5);
  REQUIRE(member.try_send(batch));
  CHECK(streamctl::testing::receive_within(gate.socket(), std::chrono::seconds(20)) == "batch");
  CHECK(streamctl::testing::receive_within(gate.socket(), std::chrono::milliseconds(300)) ==
        std::nullopt);
  CHECK(zap.refused() >= 1);
  CHECK(zap.admitted() == 1);
}
