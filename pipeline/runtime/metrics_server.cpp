#include "pipeline/runtime/metrics_server.hpp"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <mutex>
#include <system_error>
#include <thread>

#include <netdb.h>
#include <sys/socket.h>

#include <httplib.h>

#include "state/error.hpp"

namespace streamctl::runtime {

namespace {

constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";

// Why bind() failed, in words for the person who chose the address.
std::string bind_failure(int error) {
  switch (error) {
  case 0: return "cannot bind";
  case EADDRINUSE: return "address in use";
  case EADDRNOTAVAIL: return "not an address of this host";
  case EACCES: return "permission denied (ports under 1024 need privileges)";
  default: return std::system_category().message(error);
  }
}

} // namespace

ListenAddress parse_listen_address(std::string_view text, std::string_view what) {
  auto address = pipeline::listen_address_of(text);
  if (!address)
    throw Error(ErrorKind::Usage,
                std::string(what) + " = \"" + std::string(text) + "\": " + address.error());
  return *address;
}

struct MetricsServer::Impl {
  httplib::Server server;
  std::thread thread;
  std::atomic<bool> thread_done{false};
  int port = 0;
  std::mutex mutex; // guards text
  std::shared_ptr<const std::string> text = std::make_shared<const std::string>();

  std::shared_ptr<const std::string> latest() {
    std::lock_guard lock(mutex);
    return text;
  }
};

MetricsServer::MetricsServer(const ListenAddress& address, std::string_view what)
    : impl_(std::make_unique<Impl>()) {
  auto refuse = [&](const std::string& why) {
    return Error(ErrorKind::Usage,
                 "cannot listen on " + address.text() + " for " + std::string(what) + ": " + why);
  };
  // httplib's bind says only that it failed: resolve here first to tell a bad name apart.
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(address.host.c_str(), nullptr, &hints, &found); rc != 0)
    throw refuse("cannot resolve " + address.host + ": " + gai_strerror(rc));
  freeaddrinfo(found);

  auto& server = impl_->server;
  // httplib's default also sets SO_REUSEPORT, with which a second job binds the same port and
  // the two share its scrapes; SO_REUSEADDR alone still lets a job rebind a port just released.
  server.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  // Two threads, not httplib's default of one per core: a scraper's kept-alive connection
  // holds one, and the other answers anyone else.
  server.new_task_queue = [] { return new httplib::ThreadPool(2); };
  // stop() waits for the connections being served, and httplib waits up to the keep-alive
  // timeout for a connection's next request (5 s by default): a job that ends while Prometheus
  // holds a connection open exited that much later. One request per connection (scrapes come
  // seconds apart; a reconnect costs nothing) and short waits keep that under a second or two.
  server.set_keep_alive_max_count(1);
  server.set_keep_alive_timeout(1);
  server.set_read_timeout(2);
  server.set_write_timeout(2);
  // Only reads the latest text: never waits on the coordinator beyond the pointer copy.
  server.Get("/metrics", [impl = impl_.get()](const httplib::Request&, httplib::Response& res) {
    auto text = impl->latest();
    res.set_content(*text, kContentType);
  });
  // Every other path: httplib answers 404 when no handler matches.

  errno = 0;
  if (address.port == 0) {
    impl_->port = server.bind_to_any_port(address.host);
  } else {
    impl_->port = server.bind_to_port(address.host, address.port) ? address.port : -1;
  }
  if (impl_->port < 0) throw refuse(bind_failure(errno));

  impl_->thread = std::thread([impl = impl_.get()] {
    impl->server.listen_after_bind();
    impl->thread_done = true;
  });
  // httplib's stop() does nothing before the listening loop has begun, and the destructor
  // would then wait forever: wait for it to begin.
  while (!server.is_running() && !impl_->thread_done)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

MetricsServer::~MetricsServer() {
  impl_->server.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

void MetricsServer::publish(std::string text) {
  auto next = std::make_shared<const std::string>(std::move(text));
  std::lock_guard lock(impl_->mutex);
  impl_->text.swap(next);
  // The old text is freed outside the lock, as `next` goes, unless a scrape still holds it.
}

int MetricsServer::port() const {
  return impl_->port;
}

std::unique_ptr<MetricsServer> serve_metrics(const pipeline::PipelineSpec& spec,
                                             spdlog::logger& log) {
  constexpr std::string_view what = "[metrics] listen";
  auto listen = spec.root["metrics"]["listen"].value<std::string>();
  if (!listen) return nullptr;
  auto address = parse_listen_address(*listen, what);
  auto server = std::make_unique<MetricsServer>(address, what);
  log.info("metrics: Prometheus text on http://{}:{}/metrics", address.host, server->port());
  return server;
}

} // namespace streamctl::runtime
