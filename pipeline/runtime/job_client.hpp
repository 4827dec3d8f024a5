#pragma once
// One request to a running job's coordinator over its control socket (the ROUTER the workers
// use): what `streamctl status|stop|cancel JOB` send. Requests: STATUS (reply: state and the
// operators' metrics as JSON), STOP_JOB (stop gracefully, as SIGINT does), CANCEL_JOB.

#include <chrono>
#include <string>

#include "pipeline/runtime/job_directory.hpp"
#include "transport/control.hpp"

namespace streamctl::runtime {

// Sends `request` to the job's coordinator and waits up to `timeout` for its reply. Throws
// Error(Usage) when the job is not running or does not answer, naming the job and its state.
transport::ControlMessage ask_job(const JobEntry& job, const transport::ControlMessage& request,
                                  std::chrono::milliseconds timeout = std::chrono::seconds(5));

} // namespace streamctl::runtime
