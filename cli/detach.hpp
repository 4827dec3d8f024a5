#pragma once
// `streamctl run --detach`: the job runs on in a child process of its own session, its stdout
// and log in its directory under the state dir; the command prints the job id and returns.

#include <spdlog/logger.h>

#include "pipeline/runtime/coordinator.hpp"

namespace streamctl::cli {

// Forks. The parent waits until the child has registered the job, prints its id on stdout
// and returns 0 (or the child's exit code, when it ended before registering). The child runs
// the job with stdin from /dev/null, stdout into JOB_DIR/stdout and stderr into JOB_DIR/log,
// and returns the job's exit code.
int run_detached(const runtime::LoadedJob& job, runtime::RunOptions options, spdlog::logger& log);

} // namespace streamctl::cli
