#pragma once
// The launcher of a job with hosts: tasks that placement keeps on the coordinator's host
// (stdin, stdout, unshared files) start as local workers, the others through the cluster's
// launcher (ssh, slurm). One Launcher to the worker pool, so that it supervises both alike.
//
// Threading: the coordinator's thread only, as every Launcher.

#include <memory>

#include "pipeline/runtime/launcher.hpp"

namespace streamctl::runtime {

class ClusterLauncher : public Launcher {
public:
  ClusterLauncher(std::unique_ptr<Launcher> local, std::unique_ptr<Launcher> remote)
      : local_(std::move(local)), remote_(std::move(remote)) {}

  std::string_view name() const override { return remote_->name(); }
  std::vector<HostInfo> prepare() override { return remote_->prepare(); }
  HostCheck check_hosts() override { return remote_->check_hosts(); }
  std::unique_ptr<ChildProcess> start(const WorkerLaunch& launch) override {
    return launch.host.empty() ? local_->start(launch) : remote_->start(launch);
  }

private:
  std::unique_ptr<Launcher> local_;
  std::unique_ptr<Launcher> remote_;
};

} // namespace streamctl::runtime
