#pragma once
// The physical plan: how the logical graph of a PipelineSpec runs as processes.
//
// Nodes joined by a forward edge are fused into a chain (Flink's operator chaining): node B
// joins A's chain when B's only input is A, A's only consumer is B, both have the same
// parallelism and the edge is forward. Subtask i of a chain runs in one worker process as a
// task; records move inside a chain as batches in memory, and between chains over the data
// plane, partitioned per edge.

#include <cstddef>
#include <string>
#include <vector>

#include "pipeline/spec/pipeline_spec.hpp"

namespace streamctl::pipeline {

struct Chain {
  int id = 0;
  std::vector<std::size_t> nodes; // indices into PipelineSpec::nodes, head first
  int parallelism = 1;
};

// The outputs of a node: its records, and a window's late records (`late_output = "NAME"`).
inline constexpr int kMainOutput = 0;
inline constexpr int kLateOutput = 1;

// What a name in `inputs` refers to: a node's main output, or a window's late output.
struct InputRef {
  std::size_t node = 0; // index into PipelineSpec::nodes
  int port = kMainOutput;
};
// Validation guarantees that every input names something; an unknown name gives node ==
// spec.nodes.size().
InputRef resolve_input(const PipelineSpec& spec, const std::string& name);

// An edge between two chains: from the tail of `from_chain` to the head of `to_chain`.
struct ChainEdge {
  int id = 0;
  int from_chain = 0;
  int to_chain = 0;
  std::size_t from_node = 0;
  std::size_t to_node = 0;
  int input_index = 0; // position of from_node in to_node's `inputs`
  int from_port = 0;   // kMainOutput, or kLateOutput when to_node reads from_node's late_output
  Partition partition = Partition::Rebalance;

  // Whether upstream subtask u sends to downstream subtask d on this edge.
  bool connects(int u, int d) const { return partition != Partition::Forward || u == d; }
};

// One worker process: subtask `subtask` of chain `chain`.
struct Task {
  int id = 0;
  int chain = 0;
  int subtask = 0;
};

struct PhysicalPlan {
  std::vector<Chain> chains;
  std::vector<ChainEdge> edges;
  std::vector<Task> tasks;

  const Task* task_of(int chain, int subtask) const;
  // Edges arriving at / leaving a chain.
  std::vector<const ChainEdge*> edges_into(int chain) const;
  std::vector<const ChainEdge*> edges_out_of(int chain) const;
  // Number of data channels a subtask of `chain` receives from (for end-of-input counting).
  int input_channel_count(int chain, int subtask) const;
};

// Plans a validated spec (`run --parallelism N` arrives as the spec's default parallelism).
PhysicalPlan plan_job(const PipelineSpec& spec);

// Human-readable chain label: "clicks -> ok -> out".
std::string chain_label(const PipelineSpec& spec, const Chain& chain);

} // namespace streamctl::pipeline
