#include "pipeline/runtime/cluster_setup.hpp"

#include "pipeline/runtime/cluster_launcher.hpp"
#include "pipeline/runtime/local_launcher.hpp"
#include "pipeline/runtime/slurm_launcher.hpp"
#include "pipeline/runtime/ssh_launcher.hpp"
#include "pipeline/spec/placement.hpp"
#include "state/error.hpp"

namespace streamctl::runtime {

std::unique_ptr<Launcher> make_launcher(const pipeline::ClusterSpec& cluster, const RunOptions& options,
                                        spdlog::logger& log) {
  auto local = std::make_unique<LocalLauncher>(options.self_executable);
  switch (cluster.launcher) {
  case pipeline::LauncherKind::Local: return local;
  case pipeline::LauncherKind::Slurm: {
    SlurmLauncherConfig config = slurm_config_from_environment();
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

std::optional<std::string> why_no_savepoints(const pipeline::ClusterSpec& cluster) {
  if (cluster.launcher == pipeline::LauncherKind::Local ||
      cluster.storage != pipeline::CheckpointStorage::Coordinator)
    return std::nullopt;
  return "[checkpoint] storage = \"coordinator\" (the default with hosts) is not available in this "
         "version of streamctl yet: set storage = \"shared\" and a [checkpoint] dir that every host "
         "mounts at the same path";
}

void check_cluster_supported(const pipeline::ClusterSpec& cluster, bool takes_snapshots) {
  if (!takes_snapshots) return;
  if (auto why = why_no_savepoints(cluster)) throw Error(ErrorKind::Usage, *why);
}

std::vector<std::string> place_tasks(const LoadedJob& job, const std::vector<HostInfo>& hosts) {
  std::vector<pipeline::PlacementHost> placement_hosts;
  for (const auto& host : hosts) placement_hosts.push_back({host.name, host.slots});
  auto placement = pipeline::place(job.spec, job.plan, placement_hosts);
  if (!placement) throw Error(ErrorKind::Usage, "cannot place the job: " + placement.error());
  return placement->task_hosts;
}

} // namespace streamctl::runtime
