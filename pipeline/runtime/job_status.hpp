#pragma once
// What `streamctl status` shows of a running job's operators (SPEC §2).

#include <string>
#include <vector>

#include "pipeline/runtime/job_loader.hpp"
#include "pipeline/runtime/metrics_view.hpp"
#include "pipeline/runtime/worker_pool.hpp"

namespace streamctl::runtime {

// `status --json`'s operators: [{name, type, parallelism, subtasks: [{index, host, pid,
// records_in, records_out, bad_records, bytes_in, bytes_out, records_in_per_s,
// records_out_per_s, records_in_per_s_1m, records_out_per_s_1m, busy, idle, backpressured,
// input_queue, output_queue, watermark_ms?, watermark_lag_ms?, state_entries, state_bytes,
// last_checkpoint: {id, duration_ms, alignment_ms, bytes}, latency_ms?: {markers, p50, p95,
// p99, max}}]}] (metrics_view.hpp says what each means). Every node of the job appears, in
// pipeline order.
std::string status_json(const LoadedJob& job, const JobMetrics& metrics);

// "1200 records read, 1100 written, 3 bad, 400 records/s read": the progress and end lines.
std::string describe_totals(const pipeline::PipelineSpec& spec,
                            const std::vector<std::vector<NodeMetrics>>& per_task, double seconds);

// One line per `shed` node that dropped records: "shed node 's' dropped 49895 of 100000
// records (49.9%)", for the end of a run (shedding loses data on purpose: a person should see
// how much).
std::vector<std::string> describe_shedding(const pipeline::PipelineSpec& spec,
                                           const std::vector<std::vector<NodeMetrics>>& per_task);

// Warnings for a node that read records and passed none on (issue 10: a filter on a
// misspelt field drops everything with exit 0): "FILE:LINE:COL: filter 'ok' passed on none
// of the 1000 records it read", for the log's warnings. For the types whose empty output is a sign of a
// mistake (filter, flat_map, join); a shed says what it dropped in describe_shedding.
// `min_records`: only for a node that read at least that many (while a job runs, a filter
// that has passed on nothing yet may just not have met a match).
std::vector<std::string> describe_silent_drops(const pipeline::PipelineSpec& spec,
                                               const std::vector<std::vector<NodeMetrics>>& per_task,
                                               std::uint64_t min_records = 1);

// "clicks=2, counts=4": every node's parallelism, for messages.
std::string describe_parallelism(const pipeline::PipelineSpec& spec);

} // namespace streamctl::runtime
