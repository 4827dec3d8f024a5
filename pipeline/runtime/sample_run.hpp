#pragma once
// `streamctl validate FILE --sample SAMPLE` (issue 10: silent data mistakes): runs the pipeline
// as a real job, with the real coordinator and workers, over a sample of its input, so that
// what only records show (a filter that drops everything, a field no record has) is reported
// before the real run.
//
// The job is the pipeline with --set overrides, so that every node keeps its file:line:col:
//   - the first source (in file order) reads SAMPLE instead of its `path`;
//   - every other source reads an empty file;
//   - every sink becomes a file sink into a temporary directory, removed after (so nothing is
//     written where the pipeline writes, and nothing to stdout); dead letters go there too;
//   - every node runs at parallelism 1, with no checkpoints, on this host whatever [cluster] says;
//   - projection is off, so that suggestions for a missing field come from whole records.
// Only file sources can be redirected: a stdin or generator source has no path to replace.

#include <filesystem>
#include <string>

#include <spdlog/logger.h>

#include "operators/registry.hpp"
#include "pipeline/runtime/coordinator.hpp"

namespace streamctl::runtime {

// Runs `job` (as loaded by `validate`) over `sample`; the outcome's warnings are those of the
// end of the run. Throws Error(Usage), starting nothing, when a source is not a file source or
// `sample` cannot be read.
RunOutcome run_sample(const LoadedJob& job, const std::filesystem::path& sample,
                      const operators::Registry& registry, const RunOptions& options,
                      spdlog::logger& log);

} // namespace streamctl::runtime
