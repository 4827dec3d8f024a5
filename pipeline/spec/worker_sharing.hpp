#pragma once
// Which tasks share a worker process (Flink's slot sharing). A process costs this host about
// 25 ms of CPU to start (exec, the dynamic loader and its page faults, ZeroMQ's threads), and
// a job at parallelism 2 of four chains started eight: half of a 1,000,000-event Nexmark q8.
// So by default, on the coordinator's host, the tasks of the same subtask index run in one
// process, each in a thread of its own, with its own sockets: nothing else changes between
// them (their records still cross the same channels, a checkpoint still has a file per task).
//
// What stays alone, so that a rescale can still keep a worker (kept_chain.hpp) as before and
// nothing in a process outlives its task: a task that reads stdin (the process's stdin is the
// one it was started with); one whose chain holds a port or a child (tcp, zmq and exec
// sources and sinks, which a kept process would hold past its task); and one of two tasks that
// may each be kept by a rescale (a window or a reduce): a process holds at most one of those,
// so that keeping it keeps one task's state, and the others in it just end. A task on another
// host runs alone: its launcher starts one process per task.
//
// `slot_sharing = false` at the top of the pipeline gives every task a process of its own.

#include <string>
#include <vector>

#include "pipeline/spec/pipeline_spec.hpp"
#include "pipeline/spec/plan.hpp"

namespace streamctl::pipeline {

// A node whose keyed state a rescale may move in memory (Operator::take_key_group_from).
bool keeps_state_in_memory(const NodeSpec& node);
// A source or sink that holds nothing outside its process (a port, a child) that a new worker
// could want while the old one's chain still lives.
bool holds_nothing_shared(const NodeSpec& node);

// What of a chain decides whether its task may share a process, and whether a rescale may
// keep that process (runtime/worker_reuse.cpp): one walk of its nodes for both.
struct ChainTraits {
  bool reads_stdin = false;
  bool holds_shared = false;                // a source or sink that holds a port or a child
  std::vector<std::string> stateful_nodes;  // nodes that keep their state in memory, by name
};
ChainTraits traits_of(const PipelineSpec& spec, const Chain& chain);

bool slot_sharing_enabled(const PipelineSpec& spec);

// The worker processes of `tasks` (task ids of `plan`), each a list of task ids, in the order
// of their first task. `hosts` by task id: a task with a non-empty entry runs alone (as every
// task does without slot sharing).
std::vector<std::vector<int>> group_tasks_into_workers(const PipelineSpec& spec, const PhysicalPlan& plan,
                                                       const std::vector<int>& tasks,
                                                       const std::vector<std::string>& hosts = {});

} // namespace streamctl::pipeline
