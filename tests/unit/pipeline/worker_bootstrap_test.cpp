#include <catch2/catch.hpp>

#include <chrono>
#include <fcntl.h>
#include <future>
#include <string>
#include <unistd.h>

#include "pipeline/runtime/worker_bootstrap.hpp"
#include "transport/protocol.hpp"

using namespace std::chrono_literals;
using namespace streamctl;
using runtime::WorkerBootstrap;

namespace {

// A pipe holding `bytes`, its write end closed (or kept open when asked): what a worker's
// bootstrap channel looks like.
struct Channel {
  explicit Channel(const std::string& bytes, bool keep_open = false) {
    REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
    REQUIRE(::write(fds[1], bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
    if (!keep_open) close_writer();
  }
  ~Channel() {
    ::close(fds[0]);
    close_writer();
  }
  void close_writer() {
    if (fds[1] >= 0) ::close(fds[1]);
    fds[1] = -1;
  }
  int fds[2] = {-1, -1};
};

WorkerBootstrap sample() {
  WorkerBootstrap b;
  b.pipeline = "name = \"j\"\n[[source]]\nname = \"in\"\ntype = \"file\"\npath = \"a\\\\b\\nc\"\n";
  b.overrides = {"checkpoint.interval=1s", "a.b=line\nbreak", "c=\\"};
  b.security = "server_public=abc\nclient_secret=\x01\x02=";
  b.heartbeat_timeout = 7500ms;
  b.checkpoint_storage_coordinator = true;
  return b;
}

std::string error_of(const std::string& bytes) {
  Channel channel(bytes);
  try {
    runtime::read_bootstrap(channel.fds[0]);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

} // namespace

TEST_CASE("a bootstrap reads back as written, and nothing past it is taken from the channel",
          "[worker_bootstrap]") {
  WorkerBootstrap b = sample();
  b.extra["later_field"] = "kept";
  Channel channel(runtime::encode_bootstrap(b) + "after");
  WorkerBootstrap read = runtime::read_bootstrap(channel.fds[0]);
  CHECK(read.pipeline == b.pipeline);
  CHECK(read.overrides == b.overrides);
  CHECK(read.security == b.security);
  CHECK(read.heartbeat_timeout == 7500ms);
  CHECK(read.checkpoint_storage_coordinator);
  CHECK(read.extra == b.extra);
  char rest[16] = {};
  CHECK(::read(channel.fds[0], rest, sizeof rest) == 5);
  CHECK(std::string(rest) == "after");
}

TEST_CASE("a bootstrap without optional fields has no heartbeat timeout", "[worker_bootstrap]") {
  WorkerBootstrap b;
  b.pipeline = "";
  Channel channel(runtime::encode_bootstrap(b));
  WorkerBootstrap read = runtime::read_bootstrap(channel.fds[0]);
  CHECK(read.pipeline.empty());
  CHECK(read.overrides.empty());
  CHECK(read.security.empty());
  CHECK(read.heartbeat_timeout == 0ms);
  CHECK_FALSE(read.checkpoint_storage_coordinator);
}

TEST_CASE("the header line is plain text with the version and protocol", "[worker_bootstrap]") {
  std::string bytes = runtime::encode_bootstrap(sample());
  std::string expected = "streamctl-bootstrap " + std::string(runtime::streamctl_version()) + " " +
                         std::to_string(transport::kProtocolVersion) + "\n";
  CHECK(bytes.substr(0, expected.size()) == expected);
  auto header = runtime::parse_bootstrap_header("streamctl-bootstrap 9.1.0 12 words for later");
  REQUIRE(header);
  CHECK(header->version == "9.1.0");
  CHECK(header->protocol == 12);
}

TEST_CASE(
    "a coordinator of another version or protocol is refused with both versions and the host named",
    "[worker_bootstrap]") {
  auto check = [](const std::string& version, int protocol) {
    Channel channel(runtime::encode_bootstrap(sample(), version, protocol));
    try {
      runtime::read_bootstrap(channel.fds[0]);
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::Usage);
      std::string m = e.what();
      CHECK_THAT(m, Catch::Contains("is version " + std::string(runtime::streamctl_version())));
      CHECK_THAT(m, Catch::Contains("its coordinator is version " + version + " (protocol " +
                                    std::to_string(protocol) + ")"));
      char host[256] = {};
      ::gethostname(host, sizeof host - 1);
      CHECK_THAT(m, Catch::Contains("on host '" + std::string(host) + "'"));
      CHECK_THAT(m, Catch::Contains("ship_binary = true"));
    }
  };
  check("9.9.9", transport::kProtocolVersion);
  check(std::string(runtime::streamctl_version()), transport::kProtocolVersion + 1);
}

TEST_CASE("a truncated or garbled bootstrap is an error that says what was wrong",
          "[worker_bootstrap]") {
  std::string good = runtime::encode_bootstrap(sample());
  CHECK_THAT(error_of(""), Catch::Contains("ended before the bootstrap's header (it was empty)"));
  CHECK_THAT(error_of("streamctl-boot"),
             Catch::Contains("ended before the bootstrap's header (it held 'streamctl-boot')"));
  CHECK_THAT(
      error_of("GET / HTTP/1.1\n"),
      Catch::Contains("does not hold a streamctl bootstrap (it starts with 'GET / HTTP/1.1')"));
  CHECK_THAT(error_of(std::string(300, 'x')), Catch::Contains("header is longer than 200 bytes"));
  std::size_t header_end = good.find('\n') + 1;
  CHECK_THAT(error_of(good.substr(0, header_end)),
             Catch::Contains("ended before the bootstrap's length"));
  CHECK_THAT(error_of(good.substr(0, header_end) + "12x\n"),
             Catch::Contains("length is not a number: '12x'"));
  CHECK_THAT(error_of(good.substr(0, header_end) + "999999999999\n"),
             Catch::Contains("beyond the"));
  CHECK_THAT(error_of(good.substr(0, good.size() - 3)), Catch::Contains("ended after"));
  CHECK_THAT(error_of(good.substr(0, header_end) + "6\nHELLO\n"),
             Catch::Contains("not a BOOTSTRAP message"));
  CHECK_THAT(error_of(good.substr(0, header_end) + "11\nBOOTSTRAP\nx"), Catch::Contains("garbled"));
  CHECK_THAT(error_of(good.substr(0, header_end) + "10\nBOOTSTRAP\n"),
             Catch::Contains("holds no pipeline"));
}

TEST_CASE("the bootstrap channel watch calls back on EOF, and not when destroyed first",
          "[worker_bootstrap]") {
  {
    Channel channel(runtime::encode_bootstrap(sample()), true);
    runtime::read_bootstrap(channel.fds[0]);
    std::promise<void> closed;
    runtime::BootstrapChannelWatch watch(channel.fds[0], [&] { closed.set_value(); });
    auto future = closed.get_future();
    CHECK(future.wait_for(200ms) == std::future_status::timeout);
    REQUIRE(::write(channel.fds[1], "x", 1) == 1); // bytes are not the end
    CHECK(future.wait_for(200ms) == std::future_status::timeout);
    channel.close_writer();
    CHECK(future.wait_for(5s) == std::future_status::ready);
  }
  {
    Channel channel("", true);
    bool called = false;
    auto start = std::chrono::steady_clock::now();
    {
      runtime::BootstrapChannelWatch watch(channel.fds[0], [&] { called = true; });
    }
    CHECK_FALSE(called);
    CHECK(std::chrono::steady_clock::now() - start < 1s);
  }
}
