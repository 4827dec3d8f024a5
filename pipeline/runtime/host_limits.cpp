#include "pipeline/runtime/host_limits.hpp"

#include <algorithm>
#include <sys/resource.h>
#include <unistd.h>

#include "pipeline/runtime/job_directory.hpp"
#include "state/error.hpp"

namespace streamctl::runtime {

namespace {

constexpr std::size_t kWorkersPerCpu = 64;
constexpr std::size_t kBytesPerWorker = std::size_t{32} << 20;
constexpr std::size_t kNprocPerWorker = 8;
constexpr std::size_t kMinimumPerHost = 16;

} // namespace

pipeline::WorkerLimits default_worker_limits() {
  pipeline::WorkerLimits limits;
  long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  if (cpus < 1) cpus = 1;
  std::size_t per_host = kWorkersPerCpu * static_cast<std::size_t>(cpus);
  std::string origin = std::to_string(kWorkersPerCpu) + " per CPU, " + std::to_string(cpus) +
                       (cpus == 1 ? " CPU" : " CPUs");
  long pages = ::sysconf(_SC_PHYS_PAGES), page_size = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page_size > 0) {
    std::size_t by_memory =
        static_cast<std::size_t>(pages) / (kBytesPerWorker / static_cast<std::size_t>(page_size));
    if (by_memory < per_host) {
      per_host = by_memory;
      origin = "one per " + std::to_string(kBytesPerWorker >> 20) + " MiB of memory";
    }
  }
  rlimit nproc{};
  if (::getrlimit(RLIMIT_NPROC, &nproc) == 0 && nproc.rlim_cur != RLIM_INFINITY &&
      nproc.rlim_cur / kNprocPerWorker < per_host) {
    per_host = static_cast<std::size_t>(nproc.rlim_cur / kNprocPerWorker);
    origin = "one per " + std::to_string(kNprocPerWorker) + " of the process limit (ulimit -u " +
             std::to_string(nproc.rlim_cur) + ")";
  }
  if (per_host < kMinimumPerHost) {
    per_host = kMinimumPerHost;
    origin = "the minimum";
  }
  limits.per_host = per_host;
  limits.per_host_origin = origin;
  return limits;
}

std::size_t workers_running(const std::filesystem::path& state_dir) {
  std::size_t count = 0;
  for (const auto& job : list_live_jobs(state_dir)) {
    for (const auto& task : job.tasks)
      if (process_alive(task.pid)) ++count;
  }
  return count;
}

void enforce_worker_limits(const LoadedJob& job, const pipeline::WorkerLimits& limits) {
  auto problems = pipeline::check_worker_limits(job.spec, job.plan, limits);
  if (problems.empty()) return;
  std::string message;
  for (const auto& d : problems)
    message += (message.empty() ? "" : "\n") + d.to_string();
  throw Error(ErrorKind::Usage, message);
}

} // namespace streamctl::runtime
