#pragma once
// What workers report of their task in HEARTBEAT, FINISHED and ACK messages: records counted
// per node ("node:in:out:bad:state_entries:state_bytes;...", the last two optional), and the
// task's time and channel figures (TaskLoad, one message key each). Summed for progress lines.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pipeline/runtime/metrics_view.hpp"
#include "pipeline/runtime/task_chain.hpp"
#include "transport/control.hpp"

namespace streamctl::runtime {

std::string encode_metrics(const std::vector<NodeMetrics>& metrics);
// Malformed entries are skipped: metrics are informative, never worth failing a job over.
std::vector<NodeMetrics> decode_metrics(std::string_view text);

// A task's time and channels since its worker started, all counters (the coordinator derives
// rates and fractions from two reports).
struct TaskLoad {
  // Where the task's thread spent its time (Flink's definitions): waiting for input (idle),
  // waiting for room in an output channel (backpressured), the rest (busy).
  std::uint64_t busy_ms = 0;
  std::uint64_t idle_ms = 0;
  std::uint64_t backpressured_ms = 0;
  std::uint64_t bytes_in = 0;  // data frames received
  std::uint64_t bytes_out = 0; // data frames sent
  // ZeroMQ does not tell a queue's length, so fill is sampled: of the times the task looked at
  // its input, how many found a frame waiting; of the batches it sent, how many found the
  // channel full.
  std::uint64_t input_waiting = 0;
  std::uint64_t input_polls = 0;
  std::uint64_t output_full = 0;
  std::uint64_t output_sends = 0;
  std::optional<std::int64_t> watermark; // the task's current watermark (none before the first)

  void write_to(transport::ControlMessage& m) const;
  // Missing keys read as 0 (an older worker's message).
  static TaskLoad read_from(const transport::ControlMessage& m);
};

// Per node of a task, its latency figures: "node:markers:p50:p95:p99:max;..." with the
// times in whole microseconds. Malformed entries are skipped.
using NodeLatency = std::pair<std::string, LatencyFigures>;
std::string encode_latency(const std::vector<NodeLatency>& latency);
std::vector<NodeLatency> decode_latency(std::string_view text);

struct JobTotals {
  std::uint64_t read = 0;    // records out of sources
  std::uint64_t written = 0; // records into sinks
  std::uint64_t bad = 0;     // records handed to on_error, every node
  std::uint64_t shed = 0;    // records dropped by `shed` nodes (their records in - out)
  bool has_shed = false;     // the job has a `shed` node
};

JobTotals sum_metrics(const pipeline::PipelineSpec& spec, const std::vector<std::vector<NodeMetrics>>& per_task);

} // namespace streamctl::runtime
