#pragma once
// The text views of a job's status, read from the JSON object that `streamctl status --json`
// prints: `status` shows it once, grouped by operator; `top` redraws it, the busiest
// bottleneck first. The JSON is the contract (man/streamctl-status.1.scd lists its fields);
// every field but the object itself may be missing (an older coordinator, a job that never
// ran), and a missing field shows as "-", never as an error.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "state/error.hpp"

namespace streamctl::cli {

// A number of the JSON (counts fit a double exactly up to 2^53); nullopt when missing or not a
// number.
using Figure = std::optional<double>;

struct LatencyView {
  Figure markers, p50_ms, p95_ms, p99_ms, max_ms;
};

struct CheckpointView {
  Figure id, duration_ms, alignment_ms, bytes;
};

struct SubtaskView {
  std::string node; // the operator's name and type, repeated for a flat (top) table
  std::string type;
  Figure index;
  std::optional<std::string> host;
  Figure pid;
  Figure records_in, records_out, bad_records, bytes_in, bytes_out;
  Figure records_in_per_s, records_out_per_s, records_in_per_s_1m, records_out_per_s_1m;
  Figure busy, idle, backpressured, input_queue, output_queue; // fractions 0..1
  Figure watermark_ms, watermark_lag_ms;
  Figure state_entries, state_bytes;
  CheckpointView last_checkpoint;
  std::optional<LatencyView> latency;
};

struct OperatorView {
  std::string name;
  std::string type;
  Figure parallelism;
  std::vector<SubtaskView> subtasks;
};

struct FailureView {
  std::optional<std::string> node, task, message, time;
};

struct StatusView {
  std::optional<std::string> id, name, state, started, updated, last_checkpoint;
  Figure coordinator_pid, restarts, checkpoints_completed, checkpoints_failed;
  std::optional<FailureView> failure;
  // The autoscaler's last decision, as one line: "05:40:01Z slow 1 -> 2 (target in 2000/s, true
  // rate 1400/s per instance); rescaling to slow=2"; absent without one.
  std::optional<std::string> autoscale;
  // Warnings about the data: a node that passed on none of what it read, a field that no
  // input record had (with file:line:col); so far while the job runs, at its end after.
  std::vector<std::string> warnings;
  std::vector<OperatorView> operators;
};

// Reads the object; fails (naming the reason and column) only when the text is not JSON or
// not an object. A field of the wrong type reads as missing.
Result<StatusView> parse_status_view(std::string_view json);

// Whether the state is one a job does not leave: finished, failed, stopped, cancelled.
bool is_final_state(std::string_view state);

// `status`: the job line, its restarts and checkpoints, the failure cause of a failed job,
// then per operator a heading ("gen (generator) x2") and a table of its subtasks. `note`
// follows the state on the first line (" (its coordinator is gone)"). No operator table when
// `operators` is empty. Lines end in '\n'.
std::string format_status(const StatusView& view, std::string_view note = {});

// `top`: the same job lines, then one table of every subtask ("node[i]" first), most
// backpressured first (ties: busiest first), so that the bottleneck is on top.
std::string format_top(const StatusView& view);

// The subtasks of `view` in top's order.
std::vector<SubtaskView> subtasks_by_pressure(const StatusView& view);

// Human units in at most 6 characters, "-" for a missing figure: counts and rates "999", "3.4k",
// "12M"; bytes "512B", "1.2MB" (powers of 1024, as ls -h); durations "350ms", "1.2s", "2.5min",
// "3.1h", "2.0d"; fractions "12%". No space before the unit: table columns are separated by
// spaces, and a table must fit in 100 columns.
std::string human_count(Figure n);
std::string human_bytes(Figure n);
std::string human_duration_ms(Figure ms);
std::string percent(Figure fraction);

} // namespace streamctl::cli
