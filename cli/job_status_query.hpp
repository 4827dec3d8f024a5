#pragma once
// The JSON object that `streamctl status --json` prints and that `status` and `top` draw: the
// job's registration (job.json) and, while it runs, its coordinator's STATUS reply (the
// fields are listed in man/streamctl-status.1.scd).

#include <string>

#include "pipeline/runtime/job_directory.hpp"

namespace streamctl::cli {

// Asks a running job's coordinator (runtime::ask_job: throws Error(Usage) when it does not
// answer); a job in any other state answers from its registration: its operators' last
// figures and, when it failed, the cause.
std::string job_status_json(const runtime::JobEntry& entry);

} // namespace streamctl::cli
