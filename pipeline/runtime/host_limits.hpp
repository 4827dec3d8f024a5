#pragma once
// What this host can take, for the worker limits of pipeline/spec/worker_limits.hpp: the
// per-host default derived from the machine, and the workers other jobs already run here.

#include <cstddef>
#include <filesystem>

#include "pipeline/runtime/job_loader.hpp"
#include "pipeline/spec/worker_limits.hpp"

namespace streamctl::runtime {

// 64 workers per online CPU, at most one per 32 MiB of physical memory and one per 8 of the
// user's RLIMIT_NPROC (which counts threads, and a worker has a few), at least 16. Fills
// per_host and per_host_origin; per_job stays at its default.
pipeline::WorkerLimits default_worker_limits();

// The live worker processes of the jobs running or restarting under `state_dir`.
std::size_t workers_running(const std::filesystem::path& state_dir);

// Throws Error(Usage) with one "FILE:LINE:COL: message" line per limit `job` exceeds.
void enforce_worker_limits(const LoadedJob& job, const pipeline::WorkerLimits& limits);

} // namespace streamctl::runtime
