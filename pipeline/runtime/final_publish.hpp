#pragma once
// The durable record that a run publishes its final output (issue 7: a coordinator killed
// after the sinks had published everything, before job.json said "finished", was restarted
// by `streamctl restart` from its last checkpoint, and everything after it came out twice).
//
// The sinks publish what no checkpoint covers only at the very end of the job, once every
// task has read all its input (worker.cpp: finish_sink after RELEASE). From that moment no
// snapshot describes what has been published, so nothing may run the job again. As in Flink's
// FLIP-147 (sinks commit on a final checkpoint taken after the sources end), the end is made a
// durable fact before anything is published:
//
//   JOB_DIR/finishing             written (fsynced) by the coordinator before it releases the
//                                 workers: "<tasks>\n", the number of tasks of the run
//   JOB_DIR/published-<task>      written (fsynced) by each worker once its sink's final
//                                 output is published (every task writes one, sink or not)
//
// A job that takes checkpoints takes a final one before `finishing` is written (coordinator.cpp
// finish): the output it prepares is what the sinks then publish, so a worker that dies while
// they do is restarted by the running coordinator from that checkpoint, which publishes the
// rest. Those records concern only a coordinator that died meanwhile.
//
// `streamctl restart` reads them (finish_state): no `finishing`, the job may run again from
// its last checkpoint; `finishing` and every task's file, the job's output is complete and
// nothing runs again; `finishing` with a task's file missing, that task may have published
// part of its output, which can neither be repeated nor completed: restart refuses.
//
// Not thread-safe; each function touches its own files.

#include <cstddef>
#include <filesystem>
#include <vector>

#include "state/error.hpp"

namespace streamctl::runtime {

// Deletes the records of an earlier run of the job (a run starting afresh under its id).
void clear_final_publish(const std::filesystem::path& job_dir);
// The coordinator, before it lets any sink publish its final output.
Result<void> mark_finishing(const std::filesystem::path& job_dir, std::size_t tasks);
// A worker, once its sink has published all its final output.
Result<void> mark_task_published(const std::filesystem::path& job_dir, std::size_t task);

struct FinishState {
  bool finishing = false;              // the run had begun publishing its final output
  std::vector<std::size_t> unfinished; // tasks that may not have published all of it
};
// What JOB_DIR records; a `finishing` file that cannot be read counts every task unfinished.
FinishState finish_state(const std::filesystem::path& job_dir);

} // namespace streamctl::runtime
