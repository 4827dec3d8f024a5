// Throughput of one data channel over tcp loopback, plain against CURVE: an OutputChannel
// (PUSH) pushes frames of streamctl batch sizes to an InputGate (PULL) on another thread, each
// end with its own ZeroMQ context as two workers would have. Prints MB/s, messages/s and the
// CPU seconds the whole process spent (both ends and their I/O threads), and MB per CPU
// second, the figure the "records per CPU second" aim is about. Not a pass/fail test.
//
//   transport_bench [seconds_per_run=2] [frame_bytes...]   (default frames: 65536 4096 256)

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "transport/data_channel.hpp"
#include "transport/zap_handler.hpp"

using namespace streamctl::transport;

namespace {

using Clock = std::chrono::steady_clock;

double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

struct Run {
  double wall = 0;
  double cpu = 0;
  std::size_t messages = 0;
  std::size_t bytes = 0;
};

Run run(const LinkSecurity& security, std::size_t frame_bytes, double seconds) {
  zmq::context_t receiver_context;
  zmq::context_t sender_context;
  // Declared after its context and before the gate: destroyed after the gate, before the
  // context.
  ZapHandler zap(receiver_context, security, [](const Refusal& r) {
    std::fprintf(stderr, "unexpected: %s\n", describe(r).c_str());
  });
  InputGate gate(receiver_context, "tcp://127.0.0.1:*", security);
  Run result;
  std::thread receiver([&] {
    zmq::message_t message;
    while (true) {
      if (!gate.socket().recv(message, zmq::recv_flags::none)) continue;
      if (message.size() == 0) return; // the end mark
      ++result.messages;
      result.bytes += message.size();
    }
  });

  OutputChannel channel(sender_context, gate.endpoint(), 1, 0, security);
  std::string frame(frame_bytes, 'x');
  // Warm up: the handshake and the first round trips are not the channel's steady rate.
  for (int i = 0; i < 64; ++i) {
    zmq::message_t m(frame.data(), frame.size());
    channel.socket().send(m, zmq::send_flags::none);
  }
  double cpu_start = cpu_seconds();
  auto start = Clock::now();
  auto deadline = start + std::chrono::duration<double>(seconds);
  std::size_t sent = 0;
  do {
    for (int k = 0; k < 64; ++k) {
      zmq::message_t m(frame.data(), frame.size());
      channel.socket().send(m, zmq::send_flags::none); // blocks on a full queue, spending no CPU
      ++sent;
    }
  } while (Clock::now() < deadline);
  channel.socket().send(zmq::message_t(), zmq::send_flags::none);
  receiver.join();
  result.wall = std::chrono::duration<double>(Clock::now() - start).count();
  result.cpu = cpu_seconds() - cpu_start;
  result.messages -= 64; // the warm-up, received before the clock started
  result.bytes -= 64 * frame_bytes;
  if (result.messages != sent)
    std::fprintf(stderr, "lost messages: %zu of %zu\n", sent - result.messages, sent);
  return result;
}

void report(const char* mode, std::size_t frame_bytes, const Run& r) {
  std::printf("%7zu B frames  %-6s %9.1f MB/s %11.0f msg/s   cpu %5.2f s / wall %5.2f s   %8.1f MB "
              "per cpu s\n",
              frame_bytes, mode, r.bytes / r.wall / 1e6, r.messages / r.wall, r.cpu, r.wall,
              r.bytes / r.cpu / 1e6);
}

} // namespace

int main(int argc, char** argv) {
  double seconds = argc > 1 ? std::atof(argv[1]) : 2.0;
  std::vector<std::size_t> frames;
  for (int i = 2; i < argc; ++i)
    frames.push_back(std::strtoull(argv[i], nullptr, 10));
  if (frames.empty()) frames = {65536, 4096, 256};
  if (seconds <= 0) {
    std::fprintf(stderr, "usage: transport_bench [seconds_per_run] [frame_bytes...]\n");
    return 2;
  }
  LinkSecurity curve = LinkSecurity::generate();
  std::printf("one channel over tcp loopback (PUSH -> PULL, high-water mark %d frames per end), "
              "%.1f s per run\n",
              kQueueBatches, seconds);
  for (std::size_t frame : frames) {
    Run plain = run(LinkSecurity::plain(), frame, seconds);
    report("plain", frame, plain);
    Run encrypted = run(curve, frame, seconds);
    report("CURVE", frame, encrypted);
    std::printf("%7s CURVE / plain: %.0f%% of the MB/s, %.0f%% of the MB per cpu s\n", "",
                100 * (encrypted.bytes / encrypted.wall) / (plain.bytes / plain.wall),
                100 * (encrypted.bytes / encrypted.cpu) / (plain.bytes / plain.cpu));
  }
}
