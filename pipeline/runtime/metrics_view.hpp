#pragma once
// What the coordinator knows of a running job's operators, in one value: `status --json`,
// `top` and the Prometheus endpoint all show this (issue 10). One row per node subtask.
//
// Counters are job totals: they count what the job's output covers, so they survive restarts
// and rescales (an attempt that restores a checkpoint starts from the counts that checkpoint
// covered, and records replayed after a failure are not counted twice). Rates and the
// busy/idle/backpressured fractions describe the running attempt only.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace streamctl::runtime {

// Source-to-here latency of the records a node subtask handled, from latency markers
// (`[metrics] latency_interval`); absent when markers are off.
struct LatencyFigures {
  std::uint64_t markers = 0; // markers seen
  double p50_ms = 0, p95_ms = 0, p99_ms = 0, max_ms = 0;
};

// The subtask's part of the job's last completed checkpoint.
struct CheckpointFigures {
  std::uint64_t id = 0;           // 0: none completed yet
  std::uint64_t duration_ms = 0;  // barrier received (or, at a source, injected) to snapshot written
  std::uint64_t alignment_ms = 0; // first barrier to last, over the subtask's inputs
  std::uint64_t bytes = 0;        // the subtask's snapshot file, compressed
  // How long the task held its records while it took its state (the synchronous part; the
  // rest is the background writer's or a forked child's), and the snapshot's bytes before
  // compression: with [checkpoint] snapshot = "copy", what the task's memory held for it until
  // it was written (with "fork", the child's; the task pays instead for the pages it changes
  // while the child runs).
  std::uint64_t pause_ms = 0;
  std::uint64_t raw_bytes = 0;
  // With snapshot = "deferred": the longest the task was then held, after the barrier,
  // serialising key groups still frozen for this checkpoint or waiting for the writer to finish
  // one (one batch, watermark or timer tick, or the next checkpoint's completing them); 0
  // otherwise.
  std::uint64_t stall_ms = 0;
  // With snapshot = "deferred": bytes of key groups' tables the task copied for this checkpoint
  // (copy on first write), which memory held until the writer had serialised them (at most
  // 512 MB per operator; beyond, the task serialises); 0 otherwise.
  std::uint64_t copied_bytes = 0;
};

struct SubtaskMetrics {
  std::string node;     // the node's name
  std::string type;     // its TOML type: "filter", "window", ...
  int subtask = 0;      // 0 .. parallelism-1
  int parallelism = 1;
  std::string host;     // "localhost" for the coordinator's host
  int pid = 0;          // the worker's pid on its host (0: not started)

  // --- Counters (job totals) ---
  std::uint64_t records_in = 0;  // records the node read (a source: 0)
  std::uint64_t records_out = 0; // records it passed on (a sink: 0)
  std::uint64_t bad_records = 0; // records handed to on_error
  // Bytes over the task's channels: received by the first node of a fused chain, sent by the
  // last; 0 for a node inside a chain (its records never leave the process).
  std::uint64_t bytes_in = 0;
  std::uint64_t bytes_out = 0;

  // --- Rates of the running attempt, records per second ---
  double records_in_per_s = 0, records_out_per_s = 0;       // over the last heartbeat interval (~1 s)
  double records_in_per_s_1m = 0, records_out_per_s_1m = 0; // over the last minute (or since start)

  // --- Time of the task (the fused chain the node runs in), fractions of the last second ---
  // As Flink defines them: busy = handling records or timers, backpressured = waiting for room
  // in an output channel, idle = waiting for input. They add up to about 1.
  double busy = 0, idle = 0, backpressured = 0;
  // Fill of the task's input queue and output channels, 0..1 (0 where it has none).
  double input_queue = 0, output_queue = 0;

  // --- Event time ---
  std::optional<std::int64_t> watermark_ms;     // the task's current watermark, ms since the epoch
  std::optional<std::int64_t> watermark_lag_ms; // wall clock - watermark

  // --- Keyed state held by the node (operators with state) ---
  std::uint64_t state_entries = 0;
  std::uint64_t state_bytes = 0;

  CheckpointFigures last_checkpoint;
  LatencyFigures latency;
};

// Why a job failed, for `status` of a failed job.
struct FailureCause {
  std::string node;    // the node whose operator failed, when known
  std::string task;    // the task's label: "clicks -> ok[1]"
  std::string message; // the worker's last error
  std::string time;    // ISO 8601, UTC
};

struct JobMetrics {
  std::string job_id;
  std::string job_name;
  std::string state; // "running", "restarting", "stopping"
  int restarts = 0;  // restarts after failures so far
  std::uint64_t checkpoints_completed = 0;
  std::uint64_t checkpoints_failed = 0;
  std::vector<SubtaskMetrics> subtasks; // by node in pipeline order, then by subtask
};

} // namespace streamctl::runtime
