#pragma once
// How a worker process starts: on this host (clone/exec), on another host over OpenSSH, or as
// a step of a Slurm allocation ([cluster] launcher, SPEC §9). Every launcher ends in a child
// process of the coordinator (the worker itself, its `ssh` client, its `srun`), so the
// coordinator supervises all of them alike: SIGCHLD and waitpid say that a worker ended, and
// SIGKILL of that child ends it. A remote worker, which no signal of ours reaches, exits when
// its bootstrap channel (the ssh's stdin) reaches EOF, and when the coordinator's heartbeat
// stops (a cut link gives no EOF).
//
// Threading: a launcher is used by the coordinator's thread only.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/runtime/child_process.hpp"

namespace streamctl::runtime {

// One worker to start.
struct WorkerLaunch {
  int task = 0;
  std::string label;                    // "clicks -> ok[1]", for messages
  std::string host;                     // where placement put it; empty: the coordinator's host
  std::vector<std::string> worker_args; // what follows `streamctl worker`
  bool inherit_stdin = false;           // the stdin source reads the coordinator's stdin
  // Written to the worker's bootstrap channel (worker_bootstrap.hpp): the pipeline, and the
  // job's keys, which never go on a command line (ps(1) shows those to every user).
  std::string bootstrap;
};

// A host that workers may run on, as its launcher found it before the job started.
struct HostInfo {
  std::string name;                // as the user wrote it ("ops@h2")
  int slots = 0;                   // workers it takes: [cluster] hosts' slots, else its cores
  std::string coordinator_address; // the coordinator's IP address as that host reaches it
};

// What a look at every configured host found: the ones that can take workers, and why each
// other one cannot ("host 'h2': unreachable over ssh: ...").
struct HostCheck {
  std::vector<HostInfo> usable;
  std::vector<std::string> problems;
};

class Launcher {
public:
  virtual ~Launcher() = default;
  // "local", "ssh", "slurm": for messages and `status`.
  virtual std::string_view name() const = 0;
  // Before any worker starts: reaches every host, checks that its streamctl runs and matches
  // this one's version and protocol, and learns its slots. Throws Error(Usage) naming the
  // host when one cannot take workers. The local launcher has no hosts: it returns none.
  virtual std::vector<HostInfo> prepare() = 0;
  // The same look as prepare(), without failing: at a restart after a failure, the job goes on
  // on the hosts that are left (SPEC §9: losing a host is a worker failure).
  virtual HostCheck check_hosts() { return {prepare(), {}}; }
  // Starts one worker. Throws Error(Internal) when it cannot (clone fails); a worker that
  // cannot start on its host exits, and its child's exit status says so.
  virtual std::unique_ptr<ChildProcess> start(const WorkerLaunch& launch) = 0;
};

} // namespace streamctl::runtime
