#include "pipeline/runtime/snapshot_uploader.hpp"

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

#include <signal.h>
#include <unistd.h>

#include <xxhash.h>

#include "pipeline/runtime/snapshot_upload_protocol.hpp"
#include "state/hex.hpp"
#include "transport/control.hpp"
#include "transport/secure_endpoint.hpp"

namespace streamctl::runtime {

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// The file's size and XXH64, read once before anything is sent.
Result<std::pair<std::uint64_t, std::string>> size_and_hash(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return fail("cannot read '" + file.string() + "'");
  XXH64_state_t* state = XXH64_createState();
  XXH64_reset(state, 0);
  std::vector<char> buf(kUploadPartBytes);
  std::uint64_t size = 0;
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    auto n = static_cast<std::size_t>(in.gcount());
    XXH64_update(state, buf.data(), n);
    size += n;
  }
  std::string digest = state::hex64(XXH64_digest(state));
  XXH64_freeState(state);
  if (in.bad()) return fail("cannot read '" + file.string() + "'");
  return std::pair{size, digest};
}

} // namespace

Result<void> SnapshotUploader::upload(const std::filesystem::path& file, std::uint64_t checkpoint,
                                      const std::atomic<bool>& cancel) {
  const auto deadline = Clock::now() + kUploadTimeout;
  auto whole = size_and_hash(file);
  if (!whole) return fail(whole.error());
  const auto [size, digest] = *whole;
  std::ifstream in(file, std::ios::binary);
  if (!in) return fail("cannot read '" + file.string() + "'");

  zmq::socket_t socket(context_, zmq::socket_type::dealer);
  socket.set(zmq::sockopt::routing_id, upload_identity(task_, attempt_, checkpoint));
  socket.set(zmq::sockopt::linger, 0);
  transport::connect_endpoint(socket, endpoint_, security_);

  const std::string name = file.filename().string();
  auto message = [&](const char* type) {
    return transport::ControlMessage{type, {}}
        .set("task", std::to_string(task_))
        .set("attempt", std::to_string(attempt_))
        .set("checkpoint", std::to_string(checkpoint))
        .set("file", name);
  };
  std::vector<char> part(kUploadPartBytes);
  std::uint64_t sent = 0;
  int unacknowledged = 0;
  bool end_sent = false;
  for (;;) {
    // Fill the window; after the last part, the end.
    while (unacknowledged < kUploadWindow && sent < size) {
      in.read(part.data(), static_cast<std::streamsize>(std::min<std::uint64_t>(kUploadPartBytes, size - sent)));
      auto n = static_cast<std::size_t>(in.gcount());
      if (n == 0) return fail("'" + file.string() + "' ended at " + std::to_string(sent) + " of " + std::to_string(size) + " bytes");
      std::string header = transport::encode_control(message("SNAPSHOT_PART").set("offset", std::to_string(sent)));
      socket.send(zmq::buffer(header), zmq::send_flags::sndmore);
      socket.send(zmq::const_buffer(part.data(), n), zmq::send_flags::none);
      sent += n;
      ++unacknowledged;
    }
    if (!end_sent && sent == size && unacknowledged == 0) {
      std::string end = transport::encode_control(message("SNAPSHOT_END").set("size", std::to_string(size)).set("xxh64", digest));
      socket.send(zmq::buffer(end), zmq::send_flags::none);
      end_sent = true;
    }
    // Wait for a reply, waking now and then to notice the deadline and a cancel.
    zmq::pollitem_t items[] = {{socket.handle(), 0, ZMQ_POLLIN, 0}};
    zmq::poll(items, 1, 100ms);
    if (cancel.load(std::memory_order_relaxed)) return fail("the worker is stopping");
    if (!(items[0].revents & ZMQ_POLLIN)) {
      if (Clock::now() >= deadline)
        return fail("the coordinator did not store it within " + std::to_string(kUploadTimeout.count()) + " s (" +
                    std::to_string(sent) + " of " + std::to_string(size) + " bytes sent)");
      continue;
    }
    zmq::message_t reply;
    if (!socket.recv(reply, zmq::recv_flags::dontwait)) continue;
    auto decoded = transport::decode_control(reply.to_string_view());
    if (!decoded) continue;
    if (decoded->type == "SNAPSHOT_PART_OK") --unacknowledged;
    else if (decoded->type == "SNAPSHOT_STORED") return {};
    else if (decoded->type == "SNAPSHOT_ERROR") return fail("the coordinator refused it: " + decoded->get("message"));
  }
}

} // namespace streamctl::runtime
