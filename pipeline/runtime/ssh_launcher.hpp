#pragma once
// Starts workers on other hosts with the system's OpenSSH client ([cluster] launcher = "ssh",
// SPEC §9), as Open MPI and GNU parallel do: the user's ssh_config, keys, agents and
// ControlMaster apply as usual; nothing listens on the hosts but their sshd.
//
//   ssh -T -o BatchMode=yes [ssh_options] -o ConnectTimeout=N HOST -- exec BINARY worker ARGS...
//   --bootstrap-fd 0
//
// -T: no tty (a tty mangles the streams and its hangup is the wrong signal); BatchMode: never
// a password prompt on the coordinator's terminal. ssh joins the words after HOST with spaces
// and the remote user's shell parses them, so each is shell-quoted (shell_quote). The worker's
// bootstrap (pipeline, keys) goes on ssh's stdin, never on the command line; the coordinator
// keeps that stdin open, and its EOF (the coordinator or its ssh died) ends the remote worker.
//
// Threading: the coordinator's thread only (launcher.hpp). prepare() reaps its own children by
// pid: the caller must not reap with waitpid(-1) while it runs.

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/runtime/launcher.hpp"

namespace streamctl::runtime {

// 'text' quoted for a POSIX shell: a single-quoted word, each ' written '\''. Any byte but NUL
// comes through as it is.
std::string shell_quote(std::string_view text);

struct SshHostConfig {
  std::string host; // as the user wrote it: "h1", "ops@h2"
  int slots = 0;    // 0: the host's core count, read by the probe
};

// Plain data, filled from [cluster] by the caller.
struct SshLauncherConfig {
  std::vector<SshHostConfig> hosts;
  std::vector<std::string> ssh_options; // words put before HOST: {"-F", "cfg", "-p", "2222"}
  std::string binary;                   // streamctl on the hosts; empty: self_executable's path
  bool ship_binary = false; // copy self_executable to each host's cache, by content hash
  std::chrono::seconds connect_timeout{10};
  std::string self_executable; // the coordinator's binary; empty: /proc/self/exe
  std::string ssh_program = "ssh";
  // Where shipped binaries live on the hosts; empty: ${XDG_CACHE_HOME:-$HOME/.cache}/streamctl.
  std::string cache_dir;
  // Told what prepare() did that a person may want to know ("copied streamctl to h2: ...").
  std::function<void(const std::string&)> note;
};

class SshLauncher : public Launcher {
public:
  explicit SshLauncher(SshLauncherConfig config);

  std::string_view name() const override { return "ssh"; }
  // Probes every host at once (`streamctl probe` over ssh); with ship_binary first copies the
  // binary where it is missing. Throws Error(Usage) naming every host that failed and why:
  // unreachable (ssh's own message), no streamctl at that path, another version or protocol.
  std::vector<HostInfo> prepare() override;
  // The probes of prepare(), each failing host reported rather than thrown.
  HostCheck check_hosts() override;
  // `launch.host` must be one of the configured hosts. The ChildProcess is the local ssh
  // client; the worker's exit status comes back as its own (255: ssh failed).
  std::unique_ptr<ChildProcess> start(const WorkerLaunch& launch) override;

  // The full argv of ssh running `remote_command` (a shell command line, its words quoted by
  // the caller) on `host`.
  std::vector<std::string> ssh_command(const std::string& host,
                                       const std::string& remote_command) const;
  // "exec BINARY worker ARGS... --bootstrap-fd 0", quoted: what start() runs on `host`.
  std::string worker_command(const std::string& host,
                             const std::vector<std::string>& worker_args) const;
  // The streamctl path used on `host`: after prepare() with ship_binary, the shipped copy.
  const std::string& binary_on(const std::string& host) const;
  // Hosts the last prepare() copied the binary to.
  const std::vector<std::string>& shipped_to() const { return shipped_to_; }

private:
  std::string remote_binary_word(const std::string& path) const;

  SshLauncherConfig config_;
  std::string ssh_path_; // config_.ssh_program found in PATH
  std::map<std::string, std::string> binary_on_;
  std::vector<std::string> shipped_to_;
};

} // namespace streamctl::runtime
