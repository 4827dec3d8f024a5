#pragma once
// The job's Prometheus endpoint ([metrics] listen): `GET /metrics` (and HEAD) answers the
// latest text the coordinator published (prometheus_text.hpp), another path 404, another
// method 405. A thread of its own serves it, so a scrape never waits on the job: it reads the
// last text, at most about a second old, and the coordinator's thread never waits on a scrape.
//
// HTTP/1.1 of the smallest kind, written here: one request per connection (answered with
// `Connection: close`; scrapes come seconds apart), a request head of at most 8 KiB, a body
// ignored, at most 16 connections at once, each given 2 s to send its request and read the
// answer. An HTTP library (cpp-httplib) did this before, but it brought OpenSSL, zlib and
// Brotli with it: eight shared libraries, 8 ms of every start of the binary (coordinator and
// each worker), for an endpoint few jobs turn on.

#include <memory>
#include <string>
#include <string_view>

#include <spdlog/logger.h>

#include "pipeline/spec/listen_address.hpp"
#include "pipeline/spec/pipeline_spec.hpp"

namespace streamctl::runtime {

using pipeline::ListenAddress;

// "host:port". Throws Error(Usage) naming `what` ("[metrics] listen", "--metrics-listen") when
// the host or the port is missing or the port is not 0..65535.
ListenAddress parse_listen_address(std::string_view text, std::string_view what);

class MetricsServer {
public:
  // Binds `address` now, so that a port in use ends the command before anything starts:
  // throws Error(Usage) "cannot listen on ADDRESS for WHAT: WHY". Then serves from its thread.
  MetricsServer(const ListenAddress& address, std::string_view what);
  // Stops serving and joins the thread at once; a scrape in progress is cut.
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // What the next scrapes answer (until the next publish). Any thread; never blocks on a scrape
  // for longer than a pointer swap. Before the first publish, scrapes get an empty body.
  void publish(std::string text);

  int port() const; // the port bound (the one asked for unless that was 0)

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The endpoint the pipeline's `[metrics] listen` asks for, bound and serving (an empty body until
// the first publish); nullptr when it asks for none. Throws as the constructor does, or as
// parse_listen_address for a malformed address.
std::unique_ptr<MetricsServer> serve_metrics(const pipeline::PipelineSpec& spec,
                                             spdlog::logger& log);

} // namespace streamctl::runtime
