#pragma once
// The `local` launcher: a worker is a fork/exec of the coordinator's own streamctl on the
// coordinator's host. Also what starts the tasks that placement keeps on the coordinator's
// host under the other launchers.
//
// Threading: used by the coordinator's thread only, as every Launcher.

#include <string>

#include "pipeline/runtime/launcher.hpp"

namespace streamctl::runtime {

class LocalLauncher : public Launcher {
public:
  // `self_executable`: the streamctl binary the workers run (RunOptions::self_executable).
  explicit LocalLauncher(std::string self_executable)
      : self_executable_(std::move(self_executable)) {}

  std::string_view name() const override { return "local"; }
  // No hosts to reach: every worker runs here.
  std::vector<HostInfo> prepare() override { return {}; }
  std::unique_ptr<ChildProcess> start(const WorkerLaunch& launch) override;

private:
  std::string self_executable_;
};

} // namespace streamctl::runtime
