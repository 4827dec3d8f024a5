#include "pipeline/runtime/remote_checkpoint_files.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <set>
#include <system_error>
#include <unistd.h>

#include "pipeline/runtime/checkpoint_metadata.hpp"
#include "pipeline/runtime/snapshot_server.hpp"
#include "transport/control.hpp"
#include "transport/local_address.hpp"
#include "transport/secure_endpoint.hpp"

namespace streamctl::runtime {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

std::string describe(std::chrono::milliseconds d) {
  return d.count() % 1000 == 0 ? std::to_string(d.count() / 1000) + " s"
                               : std::to_string(d.count()) + " ms";
}

class FileDescriptor {
public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

private:
  int fd_;
};

Result<void> write_at(int fd, std::string_view data, std::uint64_t offset) {
  while (!data.empty()) {
    ssize_t n = ::pwrite(fd, data.data(), data.size(), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(std::strerror(errno));
    data.remove_prefix(static_cast<std::size_t>(n));
    offset += static_cast<std::uint64_t>(n);
  }
  return {};
}

// One file at a time, a window of parts in flight (the control link's round trip would
// otherwise bound the rate), every part asked for again when nothing arrives for a while.
class Fetcher {
public:
  Fetcher(zmq::context_t& context, const std::string& endpoint,
          const transport::LinkSecurity& security, int task, int attempt,
          const FetchSettings& settings)
      : socket_(context, zmq::socket_type::dealer), endpoint_(endpoint), task_(task),
        attempt_(attempt), settings_(settings) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.set(zmq::sockopt::routing_id, SnapshotServer::fetch_identity(task, attempt));
    transport::connect_endpoint(socket_, endpoint, security);
  }

  Result<void> fetch(const std::string& name, const fs::path& to) {
    auto where = [&](const std::string& what) {
      return fail(name + ": " + what + " (fetching the snapshot from the coordinator at " +
                  endpoint_ + " to " + transport::local_host_name() + ")");
    };
    FileDescriptor fd(::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (fd.get() < 0) return where("cannot create " + to.string() + ": " + std::strerror(errno));
    std::optional<std::uint64_t> total;
    std::set<std::uint64_t> in_flight;
    std::uint64_t next = 0, received = 0;
    auto ask = [&](std::uint64_t offset) {
      send(transport::ControlMessage{"FETCH", {}}
               .set("task", std::to_string(task_))
               .set("attempt", std::to_string(attempt_))
               .set("name", name)
               .set("offset", std::to_string(offset))
               .set("length", std::to_string(settings_.part)));
      in_flight.insert(offset);
    };
    ask(0); // the first answer says how big the file is
    next = settings_.part;
    const auto deadline = Clock::now() + settings_.per_file;
    auto last_arrival = Clock::now();
    while (!total || received < *total) {
      auto now = Clock::now();
      if (now >= deadline)
        return where("not received within " + describe(settings_.per_file) + " (" +
                     std::to_string(received) + " of " +
                     (total ? std::to_string(*total) : std::string("?")) + " bytes)");
      if (now - last_arrival >= settings_.resend_after) {
        for (auto offset : std::set<std::uint64_t>(in_flight))
          ask(offset);
        last_arrival = now;
      }
      auto wake = std::min(deadline, last_arrival + settings_.resend_after);
      zmq::pollitem_t items[] = {{socket_.handle(), 0, ZMQ_POLLIN, 0}};
      zmq::poll(items, 1,
                std::chrono::duration_cast<std::chrono::milliseconds>(wake - now) +
                    std::chrono::milliseconds(1));
      zmq::message_t frame;
      while (socket_.recv(frame, zmq::recv_flags::dontwait)) {
        auto m = transport::decode_control(frame.to_string_view());
        if (!m || m->get("name") != name) continue; // an answer about an earlier file
        if (m->type == "ERROR") return where("the coordinator refused it: " + m->get("message"));
        if (m->type != "FETCHED") continue;
        auto offset = static_cast<std::uint64_t>(m->get_int("offset", -1));
        if (!in_flight.contains(offset)) continue; // the answer to a request asked again
        auto size = static_cast<std::uint64_t>(m->get_int("total", -1));
        if (total && *total != size)
          return where("its size changed from " + std::to_string(*total) + " to " +
                       std::to_string(size) + " bytes while it was fetched");
        total = size;
        const std::string& data = m->get("data");
        std::uint64_t expected = offset >= size ? 0 : std::min(settings_.part, size - offset);
        if (data.size() != expected)
          return where(std::to_string(data.size()) + " bytes at " + std::to_string(offset) +
                       ", expected " + std::to_string(expected));
        if (auto ok = write_at(fd.get(), data, offset); !ok)
          return where("cannot write " + to.string() + ": " + ok.error());
        in_flight.erase(offset);
        received += data.size();
        last_arrival = Clock::now();
        while (static_cast<int>(in_flight.size()) < settings_.window && next < *total) {
          ask(next);
          next += settings_.part;
        }
      }
    }
    return {};
  }

private:
  void send(const transport::ControlMessage& m) {
    std::string body = transport::encode_control(m);
    try {
      socket_.send(zmq::buffer(body), zmq::send_flags::dontwait);
    } catch (const zmq::error_t&) {
      // A full queue: the request is asked again after resend_after.
    }
  }

  zmq::socket_t socket_;
  std::string endpoint_;
  int task_;
  int attempt_;
  FetchSettings settings_;
};

} // namespace

Result<StagingDir> fetch_snapshot(zmq::context_t& context, const std::string& endpoint,
                                  const transport::LinkSecurity& security, int task, int attempt,
                                  const FetchSettings& settings) {
  auto staging = StagingDir::create("streamctl-restore");
  if (!staging) return Failure{staging.error()};
  Fetcher fetcher(context, endpoint, security, task, attempt, settings);
  if (auto ok = fetcher.fetch(kMetadataFile, staging->path() / kMetadataFile); !ok)
    return Failure{ok.error()};
  auto metadata = read_metadata(staging->path());
  if (!metadata) return Failure{metadata.error()};
  for (const auto& t : metadata->tasks)
    if (auto ok = fetcher.fetch(t.file, staging->path() / t.file); !ok) return Failure{ok.error()};
  return std::move(*staging);
}

std::string name_on_coordinator(std::string message, const StagingDir& staged,
                                const fs::path& original) {
  const std::string copy = staged.path().string();
  const std::string named = original.string();
  bool replaced = false;
  for (auto at = message.find(copy); !copy.empty() && at != std::string::npos;
       at = message.find(copy, at + named.size())) {
    message.replace(at, copy.size(), named);
    replaced = true;
  }
  return replaced ? message + " (in the copy this worker fetched from the coordinator)" : message;
}

} // namespace streamctl::runtime
