#include "pipeline/runtime/cluster_setup.hpp"

#include "pipeline/runtime/cluster_launcher.hpp"
#include "pipeline/runtime/local_launcher.hpp"
#include "pipeline/runtime/slurm_launcher.hpp"
#include "pipeline/runtime/ssh_launcher.hpp"
#include "pipeline/spec/placement.hpp"
#include "state/error.hpp"

namespace streamctl::runtime {

std::unique_ptr<Launcher> make_launcher(const LoadedJob& job, const pipeline::ClusterSpec& cluster,
                                        const RunOptions& options, spdlog::logger& log) {
  auto local = std::make_unique<LocalLauncher>(options.self_executable);
  switch (cluster.launcher) {
  case pipeline::LauncherKind::Local: return local;
  case pipeline::LauncherKind::Slurm: {
    SlurmLauncherConfig config = slurm_config_from_environment().value_or(SlurmLauncherConfig{});
    if (config.job_id.empty()) {
      SlurmAllocationRequest request;
      request.nodes = cluster.nodes;
      request.ntasks = tasks_on_nodes(job.spec, job.plan);
      request.options = cluster.slurm_options;
      request.note = [&log](const std::string& what) { log.info("{}", what); };
      config.allocate = std::move(request);
    } else if (cluster.nodes || !cluster.slurm_options.empty()) {
      log.info("slurm: [cluster] nodes and slurm_options are not used: this process runs in Slurm "
               "job {} already", config.job_id);
    }
    config.binary = cluster.binary;
    config.self_executable = options.self_executable;
    return std::make_unique<ClusterLauncher>(std::move(local), std::make_unique<SlurmLauncher>(std::move(config)));
  }
  case pipeline::LauncherKind::Ssh: break;
  }
  SshLauncherConfig config;
  for (const auto& host : cluster.hosts) config.hosts.push_back({host.name, host.slots.value_or(0)});
  config.ssh_options = cluster.ssh_options;
  config.binary = cluster.binary;
  config.ship_binary = cluster.ship_binary;
  config.self_executable = options.self_executable;
  config.note = [&log](const std::string& what) { log.info("{}", what); };
  return std::make_unique<ClusterLauncher>(std::move(local), std::make_unique<SshLauncher>(std::move(config)));
}

std::vector<std::string> place_tasks(const LoadedJob& job, const std::vector<HostInfo>& hosts) {
  std::vector<pipeline::PlacementHost> placement_hosts;
  for (const auto& host : hosts) placement_hosts.push_back({host.name, host.slots});
  auto placement = pipeline::place(job.spec, job.plan, placement_hosts);
  if (!placement) throw Error(ErrorKind::Usage, "cannot place the job: " + placement.error());
  return placement->task_hosts;
}

} // namespace streamctl::runtime
