#include "pipeline/runtime/slurm_launcher.hpp"

#include "pipeline/runtime/own_executable.hpp"

#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <sys/wait.h>
#include <unistd.h>

#include "pipeline/runtime/host_probe.hpp"
#include "pipeline/runtime/parallel_commands.hpp"
#include "pipeline/runtime/worker_bootstrap.hpp"
#include "transport/protocol.hpp"

namespace streamctl::runtime {

namespace {

// Run by the probe step on each node: the probe, then the address slurmd reached srun on
// (which is this coordinator's host as the node sees it), under its own key so that nothing
// the probe prints can stand in for it.
constexpr const char* kProbeScript =
    R"sh("$0" probe || exit; echo "slurm_launch_address=${SLURM_LAUNCH_NODE_IPADDR:-}")sh";

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

std::string field(const std::string& out, const std::string& key) {
  std::string result;
  std::size_t at = 0;
  while ((at = out.find(key + "=", at)) != std::string::npos) {
    if (at == 0 || out[at - 1] == '\n') {
      std::size_t start = at + key.size() + 1;
      result = out.substr(start, out.find('\n', start) - start);
    }
    ++at;
  }
  return result;
}

// execv takes a path: srun is looked up in PATH once, as a shell would.
std::string find_in_path(const std::string& program) {
  if (program.find('/') != std::string::npos) return program;
  std::string dirs = env("PATH");
  if (dirs.empty()) dirs = "/usr/bin:/bin";
  std::size_t at = 0;
  while (at <= dirs.size()) {
    std::size_t colon = dirs.find(':', at);
    std::string dir = dirs.substr(at, colon == std::string::npos ? std::string::npos : colon - at);
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    if (colon == std::string::npos) break;
    at = colon + 1;
  }
  return {};
}

std::optional<int> to_int(std::string_view text) {
  int v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

std::string how_it_ended(const CommandOutcome& o) {
  return WIFEXITED(o.status) ? "exited with status " + std::to_string(WEXITSTATUS(o.status))
                             : "was killed by signal " + std::to_string(WTERMSIG(o.status));
}

} // namespace

std::optional<SlurmLauncherConfig> slurm_config_from_environment() {
  SlurmLauncherConfig config;
  config.job_id = env("SLURM_JOB_ID");
  config.nodelist = env("SLURM_JOB_NODELIST");
  config.cpus_per_node = env("SLURM_JOB_CPUS_PER_NODE");
  if (config.job_id.empty() || config.nodelist.empty()) return std::nullopt;
  return config;
}

Result<std::vector<int>> expand_cpus_per_node(std::string_view text, std::size_t nodes) {
  std::vector<int> out;
  std::string_view rest = text;
  while (!rest.empty()) {
    std::size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest.remove_prefix(comma == std::string_view::npos ? rest.size() : comma + 1);
    int repeat = 1;
    std::size_t paren = item.find('(');
    if (paren != std::string_view::npos) {
      // "2(x3)": 2 on each of 3 nodes.
      std::string_view times = item.substr(paren);
      if (times.size() < 4 || times.substr(0, 2) != "(x" || times.back() != ')')
        return Failure{"'" + std::string(item) + "' is not a CPU count"};
      auto r = to_int(times.substr(2, times.size() - 3));
      if (!r || *r < 1) return Failure{"'" + std::string(item) + "' is not a CPU count"};
      repeat = *r;
      item = item.substr(0, paren);
    }
    auto cpus = to_int(item);
    if (!cpus || *cpus < 1) return Failure{"'" + std::string(item) + "' is not a CPU count"};
    out.insert(out.end(), static_cast<std::size_t>(repeat), *cpus);
  }
  if (out.size() != nodes)
    return Failure{"SLURM_JOB_CPUS_PER_NODE='" + std::string(text) + "' names " +
                   std::to_string(out.size()) + " nodes, the allocation has " +
                   std::to_string(nodes)};
  return out;
}

SlurmLauncher::SlurmLauncher(SlurmLauncherConfig config) : config_(std::move(config)) {
  if (config_.self_executable.empty()) config_.self_executable = own_executable();
  if (config_.binary.empty()) config_.binary = config_.self_executable;
  if ((config_.job_id.empty() || config_.nodelist.empty()) && !config_.allocate)
    throw Error(ErrorKind::Internal, "the slurm launcher needs an allocation or how to make one");
  std::string srun = find_in_path(config_.srun_program);
  if (srun.empty())
    throw Error(ErrorKind::Usage, "the slurm launcher needs '" + config_.srun_program +
                                      "', which is not in PATH (Debian: apt install slurm-client)");
  config_.srun_program = srun;
}

std::vector<std::string> SlurmLauncher::srun_command(
    const std::string& node, const std::vector<std::string>& command) const {
  std::vector<std::string> argv = {config_.srun_program,
                                   "--jobid=" + config_.job_id,
                                   "--nodes=1",
                                   "--ntasks=1",
                                   "--nodelist=" + node,
                                   "--overlap",
                                   "--quiet",
                                   "--mpi=none",
                                   "--input=0",
                                   "--"};
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

std::vector<std::string> SlurmLauncher::worker_command(
    const std::string& node, const std::vector<std::string>& worker_args) const {
  std::vector<std::string> command = {config_.binary, "worker"};
  command.insert(command.end(), worker_args.begin(), worker_args.end());
  command.insert(command.end(), {"--bootstrap-fd", "0"});
  return srun_command(node, command);
}

std::vector<std::string> SlurmLauncher::nodes() {
  if (!nodes_.empty()) return nodes_;
  if (config_.job_id.empty() && !allocation_) {
    allocation_ = std::make_unique<SlurmAllocation>(*config_.allocate);
    const AllocationLine& made = allocation_->allocation();
    config_.job_id = made.job_id;
    config_.nodelist = made.nodelist;
    config_.cpus_per_node = made.cpus_per_node;
  }
  auto outcome = run_in_parallel(
      {{{config_.scontrol_program, "show", "hostnames", config_.nodelist}, ""}},
      std::chrono::milliseconds(config_.probe_timeout));
  const CommandOutcome& o = outcome.front();
  if (!o.start_error.empty())
    throw Error(ErrorKind::Usage, "cannot run '" + config_.scontrol_program +
                                      "' to read the allocation's nodes: " + o.start_error +
                                      " (Debian: apt install slurm-client)");
  if (!o.exited_with(0))
    throw Error(ErrorKind::Usage, "`scontrol show hostnames " + config_.nodelist + "` " +
                                      how_it_ended(o) + ": " + o.last_error_line());
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at < o.out.size()) {
    std::size_t eol = o.out.find('\n', at);
    std::string line = o.out.substr(at, eol == std::string::npos ? std::string::npos : eol - at);
    if (!line.empty()) out.push_back(line);
    at = eol == std::string::npos ? o.out.size() : eol + 1;
  }
  if (out.empty())
    throw Error(ErrorKind::Usage,
                "the Slurm allocation " + config_.job_id + " has no nodes ('" + config_.nodelist + "')");
  nodes_ = out;
  return nodes_;
}

std::vector<HostInfo> SlurmLauncher::prepare() {
  HostCheck check = check_hosts();
  if (!check.problems.empty()) {
    std::string message = "cannot start workers in Slurm allocation " + config_.job_id + ":";
    for (const auto& p : check.problems)
      message += "\n  " + p;
    throw Error(ErrorKind::Usage, message);
  }
  return check.usable;
}

HostCheck SlurmLauncher::check_hosts() {
  std::vector<std::string> all = nodes();
  std::vector<int> slots(all.size(), 0);
  if (!config_.cpus_per_node.empty()) {
    auto cpus = expand_cpus_per_node(config_.cpus_per_node, all.size());
    if (cpus) slots = *cpus; // else each node's cores, as its probe reports them
  }
  std::vector<CommandSpec> commands;
  for (const auto& node : all)
    commands.push_back({srun_command(node, {"sh", "-c", kProbeScript, config_.binary}), ""});
  auto outcomes = run_in_parallel(commands, std::chrono::milliseconds(config_.probe_timeout));

  HostCheck check;
  for (std::size_t k = 0; k < all.size(); ++k) {
    const std::string& node = all[k];
    const CommandOutcome& o = outcomes[k];
    std::string said = o.last_error_line();
    auto problem = [&](const std::string& what) {
      check.problems.push_back("node '" + node + "': " + what);
    };
    if (!o.start_error.empty()) {
      problem("cannot run " + config_.srun_program + ": " + o.start_error +
              " (Debian: apt install slurm-client)");
      continue;
    }
    if (o.timed_out) {
      problem("no answer from a step there within " +
              std::to_string(config_.probe_timeout.count()) + " s (srun was killed)");
      continue;
    }
    if (o.exited_with(127)) {
      problem("no streamctl at '" + config_.binary + "' (" + said +
              "): set [cluster] binary to its path on the nodes");
      continue;
    }
    if (!o.exited_with(0)) {
      problem("the probe step " + how_it_ended(o) + (said.empty() ? std::string() : ": " + said));
      continue;
    }
    auto probe = parse_probe(o.out);
    if (!probe) {
      problem("'" + config_.binary + "' is not a streamctl this version can talk to");
      continue;
    }
    if (probe->version != streamctl_version() || probe->protocol != transport::kProtocolVersion) {
      problem("streamctl at '" + config_.binary + "' is version " + probe->version +
              " (protocol " + std::to_string(probe->protocol) + "), this coordinator's is " +
              std::string(streamctl_version()) + " (protocol " +
              std::to_string(transport::kProtocolVersion) + ")");
      continue;
    }
    std::string address = field(o.out, "slurm_launch_address");
    if (address.empty()) {
      problem("its step did not say the address it reached srun on (SLURM_LAUNCH_NODE_IPADDR)");
      continue;
    }
    check.usable.push_back(HostInfo{node, slots[k] > 0 ? slots[k] : probe->cores, address});
  }
  return check;
}

std::unique_ptr<ChildProcess> SlurmLauncher::start(const WorkerLaunch& launch) {
  if (launch.inherit_stdin)
    throw Error(ErrorKind::Internal, launch.label +
                                         " reads the coordinator's stdin and cannot run on '" +
                                         launch.host + "'");
  auto argv = worker_command(launch.host, launch.worker_args);
  ChildSpec spec;
  spec.executable = argv.front();
  spec.args.assign(argv.begin() + 1, argv.end());
  spec.bootstrap = launch.bootstrap;
  spec.bootstrap_fd = 0;
  return std::make_unique<ChildProcess>(spec);
}

} // namespace streamctl::runtime
