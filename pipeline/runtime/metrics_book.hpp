#pragma once
// The coordinator's book of a job's metrics across its attempts (issue 10): what the restored
// checkpoint's counters were, so that counters stay job totals through restarts and rescales,
// and the JobMetrics of now (metrics_view.hpp), from the workers' latest reports.
//
// Counters carried from a checkpoint are those at its barrier (the _metadata's `counts`), not
// the last heartbeat's before a failure: records replayed after a restart are then counted
// once, as the job's output has them once.
//
// Not thread-safe: the coordinator's thread only.

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <spdlog/logger.h>

#include "pipeline/runtime/job_loader.hpp"
#include "pipeline/runtime/metrics_view.hpp"
#include "pipeline/runtime/worker_pool.hpp"

namespace streamctl::runtime {

// What the book cannot know by itself: the job's own state and checkpoint counts.
struct JobFacts {
  std::string job_id;
  std::string state;
  int restarts = 0;
  std::uint64_t checkpoints_completed = 0;
  std::uint64_t checkpoints_failed = 0;
};

class MetricsBook {
public:
  // A new attempt of `job` restores `restored_from` (empty: from nothing). Counters are carried
  // from its _metadata when this job (`job_id`) wrote it; a checkpoint of another run (a
  // --resume from cron) carries none, so each run counts its own records. A subtask of a node
  // whose parallelism changed takes the counts of old subtask s at s % new parallelism.
  void begin_attempt(const LoadedJob& job, const std::filesystem::path& restored_from,
                     const std::string& job_id, spdlog::logger& log);

  // Per task of the running attempt (WorkerPool::tasks()), every node of its chain with the
  // carried counts added.
  std::vector<std::vector<NodeMetrics>> totals(const LoadedJob& job, const std::vector<TaskRuntime>& tasks) const;

  // A task's counters at a checkpoint's barrier (as its ACK says, counted since its attempt
  // began) made job totals by adding what the attempt carried: what _metadata's `counts`
  // keeps, so that the next restore carries on from there.
  std::string checkpoint_counts(int subtask, std::string_view attempt_counts) const;

  // Everything `status`, `top` and /metrics show. `now_ms`: the wall clock, for watermark lag.
  JobMetrics view(const LoadedJob& job, const std::vector<TaskRuntime>& tasks, const JobFacts& facts,
                  Clock::time_point now, std::int64_t now_ms) const;

private:
  const NodeMetrics* carried(const std::string& node, int subtask) const;

  std::map<std::pair<std::string, int>, NodeMetrics> carried_; // by (node, subtask)
};

} // namespace streamctl::runtime
