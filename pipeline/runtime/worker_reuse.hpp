#pragma once
// Which worker processes a rescale keeps (kept_chain.hpp), decided from the running plan and
// the next one alone, so that the checkpoint coordinator (which parks them) and the coordinator
// (which reassigns them) agree without telling each other.
//
// A worker is kept for a task of the next plan when both chains run a node whose keyed state
// moves in memory (window, reduce: Operator::take_key_group_from) and the two subtasks' key
// groups overlap; pairs are taken by the most groups in common first, each worker and each new
// task once. Rescaling a keyed node 1 -> 2 keeps its worker for one new subtask (half of the
// groups stay), 2 -> 1 keeps one of the two (half stay); a worker that reads stdin, or a task
// that would, is never kept (the process's stdin is the one it was started with), nor one
// whose chain has a source or sink other than generator, file and stdout (a tcp or zmq one holds
// a port, an exec one a child, until the kept worker's restore ends).

#include <vector>

#include "pipeline/runtime/job_loader.hpp"

namespace streamctl::runtime {

struct WorkerReuse {
  int old_task = 0; // of the running plan
  int new_task = 0; // of the next plan
  unsigned key_groups = 0; // in common: they stay in memory
};

std::vector<WorkerReuse> plan_worker_reuse(const LoadedJob& running, const LoadedJob& next);

} // namespace streamctl::runtime
