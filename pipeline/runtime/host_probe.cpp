#include "pipeline/runtime/host_probe.hpp"

#include <charconv>
#include <cstdlib>
#include <sched.h>
#include <thread>
#include <unistd.h>

#include "pipeline/runtime/worker_bootstrap.hpp"
#include "transport/protocol.hpp"

namespace streamctl::runtime {

namespace {

int to_int(std::string_view text, int fallback) {
  int v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  return text.empty() || ec != std::errc() || end != text.data() + text.size() ? fallback : v;
}

} // namespace

HostProbe probe_this_host() {
  HostProbe p;
  p.version = std::string(streamctl_version());
  p.protocol = transport::kProtocolVersion;
  // The CPUs this process may use (a cgroup cpuset or taskset lowers it), not the machine's.
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) p.cores = CPU_COUNT(&set);
  if (p.cores <= 0) p.cores = static_cast<int>(std::thread::hardware_concurrency());
  if (p.cores <= 0) p.cores = 1;
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) == 0) p.hostname = name;
  // sshd sets "CLIENT_IP CLIENT_PORT SERVER_IP SERVER_PORT".
  if (const char* ssh = std::getenv("SSH_CONNECTION")) {
    std::string_view text(ssh);
    p.coordinator_address = std::string(text.substr(0, text.find(' ')));
  }
  return p;
}

std::string format_probe(const HostProbe& p) {
  std::string out = "version=" + p.version + "\nprotocol=" + std::to_string(p.protocol) +
                    "\ncores=" + std::to_string(p.cores) + "\nhostname=" + p.hostname + "\n";
  if (!p.coordinator_address.empty()) out += "coordinator_address=" + p.coordinator_address + "\n";
  return out;
}

Result<HostProbe> parse_probe(std::string_view text) {
  HostProbe p;
  p.protocol = -1;
  p.cores = -1;
  while (!text.empty()) {
    std::size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    std::size_t eq = line.find('=');
    if (eq == std::string_view::npos) continue; // a remote shell's greeting, say
    std::string_view key = line.substr(0, eq), value = line.substr(eq + 1);
    if (key == "version")
      p.version = std::string(value);
    else if (key == "protocol")
      p.protocol = to_int(value, -1);
    else if (key == "cores")
      p.cores = to_int(value, -1);
    else if (key == "hostname")
      p.hostname = std::string(value);
    else if (key == "coordinator_address")
      p.coordinator_address = std::string(value);
  }
  if (p.version.empty() || p.protocol < 0 || p.cores < 1)
    return Failure{"not the output of `streamctl probe` (no version, protocol or cores)"};
  return p;
}

} // namespace streamctl::runtime
