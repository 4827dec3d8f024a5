#pragma once
// `streamctl test` (SPEC §8): each [[test]] case runs the pipeline as a real job, with every
// source replaced by a file of the case's input records and every sink by a file sink, and
// compares each named sink's output with the expected records as multisets of JSON values.

#include <ostream>
#include <string>
#include <vector>

#include "pipeline/runtime/coordinator.hpp"

namespace streamctl::runtime {

struct TestOutcome {
  std::string name;
  bool passed = false;
  std::vector<std::string> details; // what differs, or why the job failed
};

// Runs every case of `job`, printing one line per case to `out` as it finishes.
std::vector<TestOutcome> run_pipeline_tests(const LoadedJob& job, const operators::Registry& registry,
                                            const RunOptions& options, spdlog::logger& log, std::ostream& out);

} // namespace streamctl::runtime
