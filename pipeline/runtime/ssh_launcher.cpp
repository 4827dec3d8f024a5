#include "pipeline/runtime/ssh_launcher.hpp"

#include "pipeline/runtime/own_executable.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include "pipeline/runtime/host_probe.hpp"
#include "pipeline/runtime/parallel_commands.hpp"
#include "pipeline/runtime/worker_bootstrap.hpp"
#include "state/error.hpp"
#include "transport/protocol.hpp"

namespace streamctl::runtime {

namespace {

// Round one of ship_binary, on each host: the binary named by its content hash is either
// there (then it is probed) or reported missing. $1: the cache directory or "" for the
// default; $2: the file name.
constexpr const char* kFindShipped =
    R"sh(d=${1:-"${XDG_CACHE_HOME:-$HOME/.cache}/streamctl"}; f="$d/$2"
if [ -x "$f" ]; then echo "shipped_path=$f"; exec "$f" probe; fi
echo "shipped_missing=$f")sh";

// Round two, where it was missing: the binary arrives on stdin, goes to a temporary file
// beside its final name, and is renamed only once whole ($3: its size), so that a copy cut
// short, or two coordinators copying at once, never leave a partial binary under the name.
constexpr const char* kShip = R"sh(d=${1:-"${XDG_CACHE_HOME:-$HOME/.cache}/streamctl"}; f="$d/$2"
mkdir -p "$d" || exit 1
t=$(mktemp "$d/.$2.XXXXXX") || exit 1
if cat > "$t" && [ "$(wc -c < "$t")" -eq "$3" ] && chmod 755 "$t" && mv -f "$t" "$f"; then
  echo "shipped_path=$f"; echo "shipped_copied=1"; exec "$f" probe
fi
rm -f "$t"; echo "cannot write $f" >&2; exit 1)sh";

std::string find_in_path(const std::string& program) {
  if (program.find('/') != std::string::npos) return program;
  const char* path = std::getenv("PATH");
  std::string_view dirs = path ? path : "/usr/bin:/bin";
  while (!dirs.empty()) {
    std::size_t colon = dirs.find(':');
    std::string dir(dirs.substr(0, colon));
    dirs.remove_prefix(colon == std::string_view::npos ? dirs.size() : colon + 1);
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

// The value of `key=` in a probe-like output, "" when absent.
std::string field(const std::string& out, const std::string& key) {
  std::size_t at = 0;
  while ((at = out.find(key + "=", at)) != std::string::npos) {
    if (at == 0 || out[at - 1] == '\n') {
      std::size_t start = at + key.size() + 1;
      return out.substr(start, out.find('\n', start) - start);
    }
    ++at;
  }
  return {};
}

struct FileHash {
  std::string hex; // XXH3-128, 32 hex digits
  std::uintmax_t size = 0;
};

FileHash hash_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorKind::Internal, "cannot read '" + path + "' to ship it to the hosts");
  XXH3_state_t* state = XXH3_createState();
  XXH3_128bits_reset(state);
  std::vector<char> buffer(1 << 20);
  FileHash out;
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    auto n = static_cast<std::size_t>(in.gcount());
    XXH3_128bits_update(state, buffer.data(), n);
    out.size += n;
  }
  XXH128_hash_t h = XXH3_128bits_digest(state);
  XXH3_freeState(state);
  char hex[33];
  std::snprintf(hex, sizeof hex, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  out.hex = hex;
  return out;
}

} // namespace

std::string shell_quote(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  out += '\'';
  return out;
}

SshLauncher::SshLauncher(SshLauncherConfig config) : config_(std::move(config)) {
  if (config_.self_executable.empty()) config_.self_executable = own_executable();
  if (config_.binary.empty()) config_.binary = config_.self_executable;
  if (config_.hosts.empty())
    throw Error(ErrorKind::Usage, "the ssh launcher has no hosts ([cluster] hosts)");
  for (const auto& h : config_.hosts) {
    // ssh would take "-oProxyCommand=..." for an option, whatever follows.
    if (h.host.empty() || h.host.front() == '-' ||
        h.host.find_first_of(" \t\n") != std::string::npos)
      throw Error(ErrorKind::Usage,
                  "'" + h.host + "' is not a host name for ssh ([cluster] hosts)");
    binary_on_[h.host] = config_.binary;
  }
  ssh_path_ = find_in_path(config_.ssh_program);
  if (ssh_path_.empty())
    throw Error(ErrorKind::Usage, "the ssh launcher needs the OpenSSH client, and '" +
                                      config_.ssh_program +
                                      "' is not in PATH (Debian: apt install openssh-client)");
}

std::vector<std::string> SshLauncher::ssh_command(const std::string& host,
                                                  const std::string& remote_command) const {
  std::vector<std::string> argv = {ssh_path_, "-T", "-o", "BatchMode=yes"};
  argv.insert(argv.end(), config_.ssh_options.begin(), config_.ssh_options.end());
  // After the user's options: ssh takes the first value it is given, so theirs win.
  argv.insert(argv.end(),
              {"-o", "ConnectTimeout=" + std::to_string(config_.connect_timeout.count()), host,
               "--", remote_command});
  return argv;
}

// A path under "~/" is the remote user's home, which a quoted ~ would not expand to.
std::string SshLauncher::remote_binary_word(const std::string& path) const {
  if (path.rfind("~/", 0) == 0) return "\"$HOME\"/" + shell_quote(path.substr(2));
  return shell_quote(path);
}

const std::string& SshLauncher::binary_on(const std::string& host) const {
  auto it = binary_on_.find(host);
  if (it == binary_on_.end())
    throw Error(ErrorKind::Internal, "host '" + host + "' is not one of [cluster] hosts");
  return it->second;
}

std::string SshLauncher::worker_command(const std::string& host,
                                        const std::vector<std::string>& worker_args) const {
  std::string command = "exec " + remote_binary_word(binary_on(host)) + " worker";
  for (const auto& a : worker_args)
    command += " " + shell_quote(a);
  return command + " --bootstrap-fd 0";
}

std::vector<HostInfo> SshLauncher::prepare() {
  HostCheck check = check_hosts();
  if (!check.problems.empty()) {
    std::string message = "cannot start workers over ssh:";
    for (const auto& p : check.problems)
      message += "\n  " + p;
    throw Error(ErrorKind::Usage, message);
  }
  return check.usable;
}

HostCheck SshLauncher::check_hosts() {
  const auto& hosts = config_.hosts;
  const auto probe_timeout =
      std::chrono::milliseconds(config_.connect_timeout) + std::chrono::seconds(30);
  std::vector<CommandSpec> commands;
  FileHash hash;
  std::string shipped_name;
  shipped_to_.clear();
  if (config_.ship_binary) {
    hash = hash_file(config_.self_executable);
    shipped_name = "streamctl-" + hash.hex;
    for (const auto& h : hosts)
      commands.push_back(
          {ssh_command(h.host, "sh -c " + shell_quote(kFindShipped) + " streamctl-ship " +
                                   shell_quote(config_.cache_dir) + " " +
                                   shell_quote(shipped_name)),
           ""});
  } else {
    for (const auto& h : hosts)
      commands.push_back(
          {ssh_command(h.host, "exec " + remote_binary_word(binary_on(h.host)) + " probe"), ""});
  }
  std::vector<CommandOutcome> outcomes = run_in_parallel(commands, probe_timeout);

  if (config_.ship_binary) {
    std::vector<std::size_t> missing;
    std::vector<CommandSpec> copies;
    for (std::size_t k = 0; k < hosts.size(); ++k) {
      if (!outcomes[k].exited_with(0) || field(outcomes[k].out, "shipped_missing").empty())
        continue;
      missing.push_back(k);
      copies.push_back(
          {ssh_command(hosts[k].host, "sh -c " + shell_quote(kShip) + " streamctl-ship " +
                                          shell_quote(config_.cache_dir) + " " +
                                          shell_quote(shipped_name) + " " +
                                          std::to_string(hash.size)),
           config_.self_executable});
    }
    if (!copies.empty()) {
      auto copied = run_in_parallel(copies, probe_timeout + std::chrono::minutes(5));
      for (std::size_t k = 0; k < missing.size(); ++k)
        outcomes[missing[k]] = std::move(copied[k]);
    }
  }

  std::vector<HostInfo> out;
  std::vector<std::string> problems;
  for (std::size_t k = 0; k < hosts.size(); ++k) {
    const std::string& host = hosts[k].host;
    const CommandOutcome& o = outcomes[k];
    std::string path = config_.ship_binary ? field(o.out, "shipped_path") : binary_on(host);
    if (path.empty())
      path = config_.ship_binary ? "(its cache of shipped binaries)" : binary_on(host);
    std::string said = o.last_error_line();
    auto problem = [&](const std::string& what) {
      problems.push_back("host '" + host + "': " + what);
    };
    if (!o.start_error.empty()) {
      problem("cannot run ssh: " + o.start_error);
      continue;
    }
    if (o.timed_out) {
      problem(
          "no answer within " +
          std::to_string(std::chrono::duration_cast<std::chrono::seconds>(probe_timeout).count()) +
          " s (ssh was killed)");
      continue;
    }
    if (o.exited_with(255)) {
      problem("unreachable over ssh: " +
              (said.empty() ? std::string("ssh exited with status 255") : said));
      continue;
    }
    if (o.exited_with(127)) {
      problem("no streamctl at '" + path + "' (" + said +
              "): set [cluster] binary to its path on the hosts, or ship_binary = true to copy "
              "this one there");
      continue;
    }
    if (o.exited_with(126)) {
      problem("'" + path + "' cannot be run there (" + said + ")");
      continue;
    }
    if (!o.exited_with(0)) {
      std::string how = WIFEXITED(o.status)
                            ? "exited with status " + std::to_string(WEXITSTATUS(o.status))
                            : "was killed by signal " + std::to_string(WTERMSIG(o.status));
      problem("`" + path + " probe` " + how + (said.empty() ? std::string() : ": " + said) +
              " (is it a streamctl older than " + std::string(streamctl_version()) + "?)");
      continue;
    }
    auto probe = parse_probe(o.out);
    if (!probe) {
      problem("'" + path +
              "' is not a streamctl this version can talk to: `probe` printed no version");
      continue;
    }
    if (probe->version != streamctl_version() || probe->protocol != transport::kProtocolVersion) {
      problem("streamctl at '" + path + "' is version " + probe->version + " (protocol " +
              std::to_string(probe->protocol) + "), this coordinator's is " +
              std::string(streamctl_version()) + " (protocol " +
              std::to_string(transport::kProtocolVersion) +
              "): install the same version there, or set [cluster] ship_binary = true");
      continue;
    }
    if (config_.ship_binary) {
      binary_on_[host] = path;
      if (field(o.out, "shipped_copied") == "1") {
        shipped_to_.push_back(host);
        if (config_.note) config_.note("copied streamctl to " + host + ":" + path);
      }
    }
    out.push_back(HostInfo{host, hosts[k].slots > 0 ? hosts[k].slots : probe->cores,
                           probe->coordinator_address});
  }
  return HostCheck{std::move(out), std::move(problems)};
}

std::unique_ptr<ChildProcess> SshLauncher::start(const WorkerLaunch& launch) {
  if (launch.inherit_stdin)
    throw Error(ErrorKind::Internal, launch.label +
                                         " reads the coordinator's stdin and cannot run on '" +
                                         launch.host + "'");
  auto argv = ssh_command(launch.host, worker_command(launch.host, launch.worker_args));
  ChildSpec spec;
  spec.executable = argv.front();
  spec.args.assign(argv.begin() + 1, argv.end());
  spec.bootstrap = launch.bootstrap;
  spec.bootstrap_fd = 0;
  return std::make_unique<ChildProcess>(spec);
}

} // namespace streamctl::runtime
