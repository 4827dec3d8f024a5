#pragma once
// What `streamctl probe` (hidden) reports about the host it runs on, so that a launcher can
// check a host before the job starts: that streamctl runs there, its version and protocol,
// how many workers it takes, and the coordinator's address as that host sees it.
//
// Output: one key=value per line, keys in any order, unknown keys ignored by readers:
//   version=0.1.0
//   protocol=1
//   cores=8                   CPUs this process may run on (sched_getaffinity)
//   hostname=h2               gethostname()
//   coordinator_address=10.0.0.1   the first word of $SSH_CONNECTION; absent without it

#include <string>
#include <string_view>

#include "state/error.hpp"

namespace streamctl::runtime {

struct HostProbe {
  std::string version;
  int protocol = 0;
  int cores = 0;
  std::string hostname;
  std::string coordinator_address; // empty: not started over ssh
};

// This host, as this process sees it.
HostProbe probe_this_host();
std::string format_probe(const HostProbe& probe);
// Fails when version, protocol or cores is missing: not a streamctl probe's output.
Result<HostProbe> parse_probe(std::string_view text);

} // namespace streamctl::runtime
