#pragma once
// Records counted per node subtask, as workers report them in HEARTBEAT and FINISHED messages
// ("node:in:out:bad;node:in:out:bad"), and summed for progress lines.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/runtime/task_chain.hpp"

namespace streamctl::runtime {

std::string encode_metrics(const std::vector<NodeMetrics>& metrics);
// Malformed entries are skipped: metrics are informative, never worth failing a job over.
std::vector<NodeMetrics> decode_metrics(std::string_view text);

struct JobTotals {
  std::uint64_t read = 0;    // records out of sources
  std::uint64_t written = 0; // records into sinks
  std::uint64_t bad = 0;     // records handed to on_error, every node
  std::uint64_t shed = 0;    // records dropped by `shed` nodes (their records in - out)
  bool has_shed = false;     // the job has a `shed` node
};

JobTotals sum_metrics(const pipeline::PipelineSpec& spec, const std::vector<std::vector<NodeMetrics>>& per_task);

} // namespace streamctl::runtime
