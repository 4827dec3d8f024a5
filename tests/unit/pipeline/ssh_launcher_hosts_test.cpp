// SshLauncher against real sshd on namespace hosts: hidden ([.ssh]), run by
// tests/hosts/ssh_launcher.sh, which brings the hosts up and sets:
//   STREAMCTL_SSH_CONFIG      an ssh_config naming the hosts
//   STREAMCTL_SSH_HOSTS       "h1 h2 h3": hosts with sshd running
//   STREAMCTL_SSH_DOWN_HOST   a host whose sshd is stopped
//   STREAMCTL_SSH_NETNS_PREFIX  host h1's network namespace is PREFIX + "h1"
//   STREAMCTL_SSH_COORDINATOR_ADDRESS  this side's address on the hosts' network
//   STREAMCTL_SSH_DISK        a directory that is each host's own (a tmpfs per host)
//   STREAMCTL, SOURCE_DIR     the streamctl binary, the project root
#include <catch2/catch.hpp>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <sched.h>
#include <set>
#include <sstream>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <zmq.hpp>

#include "pipeline/runtime/parallel_commands.hpp"
#include "pipeline/runtime/ssh_launcher.hpp"
#include "pipeline/runtime/worker_bootstrap.hpp"
#include "state/error.hpp"
#include "transport/control.hpp"
#include "transport/protocol.hpp"
#include "unit/temp_dir.hpp"

using namespace std::chrono_literals;
using namespace streamctl;
using namespace streamctl::runtime;
using Clock = std::chrono::steady_clock;

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0')
    FAIL(std::string(name) + " is not set: run tests/hosts/ssh_launcher.sh");
  return v;
}

std::vector<std::string> words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;)
    out.push_back(w);
  return out;
}

SshLauncherConfig config_for(const std::vector<std::string>& hosts) {
  SshLauncherConfig c;
  for (const auto& h : hosts)
    c.hosts.push_back({h, 0});
  c.ssh_options = {"-F", env("STREAMCTL_SSH_CONFIG")};
  c.self_executable = env("STREAMCTL");
  c.connect_timeout = 5s;
  return c;
}

std::string usage_error_of(SshLauncherConfig config) {
  try {
    SshLauncher launcher(std::move(config));
    launcher.prepare();
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Usage);
    return e.what();
  }
  return "(no error)";
}

std::set<std::string> host_pids(const std::string& host) {
  auto out = run_in_parallel(
      {{{"ip", "netns", "pids", env("STREAMCTL_SSH_NETNS_PREFIX") + host}, ""}}, 10s);
  REQUIRE(out[0].exited_with(0));
  auto list = words(out[0].out);
  return {list.begin(), list.end()};
}

std::string ssh_output(const std::string& host, const std::string& command) {
  auto out =
      run_in_parallel({{{"ssh", "-F", env("STREAMCTL_SSH_CONFIG"), host, "--", command}, ""}}, 30s);
  INFO(out[0].err);
  REQUIRE(out[0].exited_with(0));
  return out[0].out;
}

// The pipeline of examples/clicks_filter.toml with its filter at parallelism 2, so that task 1
// (one filter subtask) has an input gate and says where in READY.
WorkerBootstrap sample_bootstrap() {
  std::ifstream in(env("SOURCE_DIR") + "/examples/clicks_filter.toml");
  std::stringstream text;
  text << in.rdbuf();
  WorkerBootstrap b;
  b.pipeline = text.str();
  b.overrides = {"operators.ok.parallelism=2"};
  return b;
}

// Stands in for the coordinator's control socket, on the hosts' network.
struct FakeCoordinator {
  FakeCoordinator() : router(context, zmq::socket_type::router) {
    router.set(zmq::sockopt::linger, 0);
    router.bind("tcp://" + env("STREAMCTL_SSH_COORDINATOR_ADDRESS") + ":*");
    endpoint = router.get(zmq::sockopt::last_endpoint);
  }
  // The next message of `type` from a worker, skipping others (ALIVE).
  std::optional<transport::ControlMessage> await(const std::string& type,
                                                 std::chrono::seconds within) {
    auto deadline = Clock::now() + within;
    while (Clock::now() < deadline) {
      zmq::pollitem_t items[] = {{router.handle(), 0, ZMQ_POLLIN, 0}};
      zmq::poll(items, 1, 100ms);
      zmq::message_t identity, body;
      while (router.recv(identity, zmq::recv_flags::dontwait)) {
        REQUIRE(router.recv(body, zmq::recv_flags::dontwait));
        auto m = transport::decode_control(body.to_string_view());
        if (m && m->type == type) return m;
      }
    }
    return std::nullopt;
  }
  zmq::context_t context;
  zmq::socket_t router;
  std::string endpoint;
};

WorkerLaunch launch_on(const std::string& host, const std::string& coordinator,
                       const std::string& bootstrap) {
  WorkerLaunch l;
  l.task = 1;
  l.label = "ok[0]";
  l.host = host;
  l.worker_args = {"--job-dir",     "/nonexistent/job",
                   "--base-dir",    env("SOURCE_DIR") + "/examples",
                   "--socket-dir",  "/tmp",
                   "--file-name",   "clicks_filter.toml",
                   "--task",        "1",
                   "--coordinator", coordinator,
                   "--transport",   "tcp"};
  l.bootstrap = bootstrap;
  return l;
}

int wait_for_exit(ChildProcess& child, std::chrono::seconds within) {
  auto deadline = Clock::now() + within;
  int status = 0;
  while (Clock::now() < deadline) {
    if (::waitpid(child.pid(), &status, WNOHANG) == child.pid()) {
      child.reaped(status);
      return status;
    }
    std::this_thread::sleep_for(10ms);
  }
  FAIL("the ssh child did not exit within " << within.count() << " s");
  return -1;
}

// Waits until no process but those in `before` (the host's sshd, and perhaps the session of
// a login that was ending then) runs on the host; returns how long.
Clock::duration wait_until_only(const std::string& host, const std::set<std::string>& before,
                                std::chrono::seconds within) {
  auto start = Clock::now();
  std::set<std::string> now;
  while (Clock::now() - start < within) {
    now = host_pids(host);
    if (std::includes(before.begin(), before.end(), now.begin(), now.end()))
      return Clock::now() - start;
    std::this_thread::sleep_for(20ms);
  }
  std::string left;
  for (const auto& p : now)
    left += " " + p;
  FAIL("processes left on " << host << ":" << left);
  return {};
}

// stderr of children started meanwhile goes to a file.
struct CapturedStderr {
  CapturedStderr() : path(dir.path / "stderr") {
    saved = ::dup(2);
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 2);
    ::close(fd);
  }
  ~CapturedStderr() { restore(); }
  void restore() {
    if (saved < 0) return;
    ::dup2(saved, 2);
    ::close(saved);
    saved = -1;
  }
  std::string text() const {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  testing::TempDir dir;
  std::filesystem::path path;
  int saved = -1;
};

} // namespace

TEST_CASE("prepare() reaches every host at once and learns its slots and the coordinator's address",
          "[.ssh]") {
  auto hosts = words(env("STREAMCTL_SSH_HOSTS"));
  REQUIRE(hosts.size() == 3);
  auto config = config_for(hosts);
  config.hosts[0].slots = 5;
  SshLauncher launcher(config);
  auto start = Clock::now();
  auto infos = launcher.prepare();
  WARN("prepare took "
       << std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count()
       << " ms");
  CHECK(Clock::now() - start < 10s);
  cpu_set_t set;
  CPU_ZERO(&set);
  REQUIRE(::sched_getaffinity(0, sizeof set, &set) == 0);
  REQUIRE(infos.size() == 3);
  for (std::size_t k = 0; k < 3; ++k) {
    CHECK(infos[k].name == hosts[k]);
    CHECK(infos[k].slots == (k == 0 ? 5 : CPU_COUNT(&set)));
    CHECK(infos[k].coordinator_address == env("STREAMCTL_SSH_COORDINATOR_ADDRESS"));
  }
  CHECK(launcher.binary_on(hosts[1]) == env("STREAMCTL"));
  CHECK(launcher.shipped_to().empty());
}

TEST_CASE("an unreachable host fails prepare() with the host named and ssh's reason", "[.ssh]") {
  auto hosts = words(env("STREAMCTL_SSH_HOSTS"));
  std::string down = env("STREAMCTL_SSH_DOWN_HOST");
  std::string message = usage_error_of(config_for({hosts[0], down, "no-such-host.invalid"}));
  INFO(message);
  CHECK_THAT(message,
             Catch::Contains("host '" + down + "': unreachable over ssh: ssh: connect to host"));
  CHECK_THAT(message, Catch::Contains("Connection refused"));
  CHECK_THAT(
      message,
      Catch::Contains(
          "host 'no-such-host.invalid': unreachable over ssh: ssh: Could not resolve hostname"));
  CHECK_THAT(message, !Catch::Contains("host '" + hosts[0] + "'"));
}

TEST_CASE("a wrong binary path fails prepare() naming the host and the path", "[.ssh]") {
  auto config = config_for({words(env("STREAMCTL_SSH_HOSTS"))[1]});
  config.binary = "/opt/no such dir/streamctl";
  std::string message = usage_error_of(config);
  INFO(message);
  CHECK_THAT(message, Catch::Contains("host '" + config.hosts[0].host +
                                      "': no streamctl at '/opt/no such dir/streamctl'"));
  CHECK_THAT(message, Catch::Contains(
                          "set [cluster] binary to its path on the hosts, or ship_binary = true"));
}

TEST_CASE("a streamctl of another version on a host fails prepare() with both versions", "[.ssh]") {
  testing::TempDir dir;
  std::string fake = (dir.path / "streamctl").string();
  {
    std::ofstream out(fake);
    out << "#!/bin/sh\n[ \"$1\" = probe ] || exit 9\necho version=9.9.9\necho protocol="
        << transport::kProtocolVersion << "\necho cores=2\necho hostname=$(hostname)\n";
  }
  ::chmod(fake.c_str(), 0755);
  auto config = config_for({words(env("STREAMCTL_SSH_HOSTS"))[2]});
  config.binary = fake;
  std::string message = usage_error_of(config);
  INFO(message);
  CHECK_THAT(message,
             Catch::Contains("host '" + config.hosts[0].host + "': streamctl at '" + fake +
                             "' is version 9.9.9 (protocol " +
                             std::to_string(transport::kProtocolVersion) +
                             "), this coordinator's is " + std::string(streamctl_version())));
  CHECK_THAT(message, Catch::Contains("ship_binary = true"));
}

TEST_CASE("ship_binary copies the coordinator's binary to each host once, and the copy runs there",
          "[.ssh]") {
  auto hosts = words(env("STREAMCTL_SSH_HOSTS"));
  auto config = config_for(hosts);
  config.ship_binary = true;
  config.binary = "/opt/not/there"; // shipping replaces it
  config.cache_dir = env("STREAMCTL_SSH_DISK") + "/cache";
  std::vector<std::string> notes;
  config.note = [&](const std::string& n) { notes.push_back(n); };
  SshLauncher first(config);
  auto infos = first.prepare();
  CHECK(infos.size() == 3);
  CHECK(first.shipped_to() == hosts);
  CHECK(notes.size() == 3);
  std::string path = first.binary_on(hosts[0]);
  CHECK_THAT(path, Catch::Matches(config.cache_dir + "/streamctl-[0-9a-f]{32}"));
  for (const auto& h : hosts)
    CHECK(first.binary_on(h) == path);
  // Each host's disk is its own: the copies are there, not here.
  CHECK_FALSE(std::filesystem::exists(path));
  std::map<std::string, std::string> stamps;
  for (const auto& h : hosts) {
    stamps[h] = ssh_output(h, "stat -c '%i %Y.%y' " + shell_quote(path));
    CHECK(ssh_output(h, shell_quote(path) + " --version") ==
          "streamctl " + std::string(streamctl_version()) + "\n");
  }

  notes.clear();
  SshLauncher second(config);
  CHECK(second.prepare().size() == 3);
  CHECK(second.shipped_to().empty());
  CHECK(notes.empty());
  for (const auto& h : hosts) {
    CHECK(second.binary_on(h) == path);
    CHECK(ssh_output(h, "stat -c '%i %Y.%y' " + shell_quote(path)) == stamps[h]);
  }
}

TEST_CASE("a remote worker binds on its host's address and exits at once when its ssh is killed -9",
          "[.ssh]") {
  std::string host = words(env("STREAMCTL_SSH_HOSTS"))[0];
  SshLauncher launcher(config_for({host}));
  launcher.prepare();
  auto before = host_pids(host);
  FakeCoordinator coordinator;
  auto child =
      launcher.start(launch_on(host, coordinator.endpoint, encode_bootstrap(sample_bootstrap())));
  auto ready = coordinator.await("READY", 30s);
  REQUIRE(ready);
  // Not 127.0.0.1: the address its host reaches the coordinator from (the overrides came
  // through too: without them task 1 would have no input and no endpoint).
  auto probe = run_in_parallel(
      {{{"ssh", "-F", env("STREAMCTL_SSH_CONFIG"), host, "--", "hostname -I"}, ""}}, 30s);
  auto addresses = words(probe[0].out);
  REQUIRE(addresses.size() == 1);
  CHECK_THAT(ready->get("endpoint"), Catch::StartsWith("tcp://" + addresses[0] + ":"));
  CHECK(host_pids(host).size() > before.size());

  ::kill(child->pid(), SIGKILL); // the coordinator's ssh dies; its stdin pipe stays open here
  wait_for_exit(*child, 10s);
  auto took = wait_until_only(host, before, 10s);
  WARN("the worker and its sshd session were gone after "
       << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms");
  CHECK(took < 3s);
}

TEST_CASE("a remote worker whose coordinator stops answering exits after the heartbeat timeout",
          "[.ssh]") {
  std::string host = words(env("STREAMCTL_SSH_HOSTS"))[1];
  SshLauncher launcher(config_for({host}));
  launcher.prepare();
  auto before = host_pids(host);
  FakeCoordinator
      coordinator; // reads ALIVE, never answers ALIVE_OK: a cut link, as the worker sees it
  WorkerBootstrap b = sample_bootstrap();
  b.heartbeat_timeout = 1500ms;
  CapturedStderr err;
  auto child = launcher.start(launch_on(host, coordinator.endpoint, encode_bootstrap(b)));
  auto start = Clock::now();
  int status = wait_for_exit(*child, 20s);
  err.restore();
  auto took = Clock::now() - start;
  INFO(err.text());
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 1);
  CHECK(took >= 1500ms);
  CHECK_THAT(err.text(), Catch::Contains("the coordinator has not answered for 1500 ms: exiting"));
  wait_until_only(host, before, 10s);
}

TEST_CASE("a remote worker given a bootstrap of another version exits 2 with the message",
          "[.ssh]") {
  std::string host = words(env("STREAMCTL_SSH_HOSTS"))[2];
  SshLauncher launcher(config_for({host}));
  launcher.prepare();
  FakeCoordinator coordinator;
  CapturedStderr err;
  auto child = launcher.start(
      launch_on(host, coordinator.endpoint, encode_bootstrap(sample_bootstrap(), "9.9.9", 99)));
  int status = wait_for_exit(*child, 20s);
  err.restore();
  INFO(err.text());
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 2);
  CHECK_THAT(err.text(), Catch::Contains("streamctl worker on host '" + host + "' is version " +
                                         std::string(streamctl_version())));
  CHECK_THAT(err.text(), Catch::Contains("its coordinator is version 9.9.9 (protocol 99)"));
  // It refused before anything else: it never reached the coordinator.
  CHECK_FALSE(coordinator.await("READY", 1s));
}
