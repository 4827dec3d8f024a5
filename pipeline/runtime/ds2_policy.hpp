#pragma once
// The DS2 scaling model (Kalavri et al., "Three steps is all you need: fast, accurate,
// automatic scaling decisions for distributed streaming dataflows", OSDI 2018), as pure
// functions of the job's graph and what its subtasks were seen doing: no sockets, no processes.
// The autoscaler's controller calls decide_ds2() every [autoscale] interval and rescales to
// changes(); the decision's rows are also what logs and `status` show of it.
//
// The model, per node:
//   true rate       = records the node handled per second of its task's busy time, per instance
//                     (observed rate / busy instances, where busy instances = the sum over its
//                     subtasks of their busy fraction): what one instance could do flat out;
//   selectivity     = observed records out / observed records in;
//   target input    = the sum, over its inputs, of the upstream's target output;
//   target output   = selectivity x target input; a source's is its configured rate (a
//                     generator's `rate`, or one given to decide_ds2), else its observed rate;
//   required        = target input / (true rate x target_utilization), a real number of
//                     instances; the optimum is its ceiling, clamped to [min, max].
// Nodes are walked in topological order from the sources, so one decision takes every node to
// its optimum at once, instead of one bottleneck per rescale.
//
// Choices the paper leaves open:
// - Fused chains. The nodes of a chain run in one task and share its busy time, and the planner
//   fuses only nodes of equal parallelism; so a chain is decided as one: each node's required
//   instances are computed with the whole task's busy time (for a node inside a chain this gives
//   the same figure as for its head, since its records and the head's share one clock), and the
//   chain takes the largest. Every node of a chain gets the same parallelism and the chain stays
//   fused after the rescale.
// - Sources. A source's demand comes from outside: its observed rate is what the job let it
//   read, not what it should read. A chain with a source is therefore kept as it is, unless the
//   source has a configured rate, and then it only grows (the source task is itself the
//   bottleneck when its busy time cannot produce the configured rate at target_utilization);
//   it is never shrunk by the autoscaler.
// - Single-instance types (stdin, stdout) always run with parallelism 1; so does their chain.
// - Edges. Forward, rebalance and key edges spread the upstream's records over the instances,
//   so they add to the target input as they are (a skewed key makes the model optimistic, as
//   in the paper). A broadcast edge sends every record to every instance: its records load each
//   instance whatever the parallelism, so the node needs p with
//   spread input / p + broadcast input <= true rate x target_utilization, and no p is enough
//   when the broadcast input alone is more (the node keeps its parallelism, saying so).
//   In what such a node passes on, broadcast records count once per current instance.
// - Joins: the target input is the sum of both sides' target outputs, as for any node.
// - A window's late output is taken to carry the window's target output (an overestimate).
// - Missing data makes no decision: a node with no observations, no busy time (no data yet),
//   or no records in keeps its parallelism; nodes downstream of one whose target output is
//   unknown have no target input and keep theirs too.
// - Hysteresis: measured rates are noisy, and a rescale costs a savepoint and a restore; so
//   the parallelism p changes only when the required instances leave the band
//   ((p - 1) / 1.1, 1.1 p]: grow when more than 10% above the current capacity is needed,
//   shrink only when one instance fewer would still leave 10% to spare. An optimum within 10%
//   of the current capacity keeps it, so observations 10% either side of the right size do
//   not flip the decision back and forth.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/runtime/autoscale_settings.hpp"
#include "pipeline/runtime/metrics_view.hpp"
#include "pipeline/spec/pipeline_spec.hpp"
#include "pipeline/spec/plan.hpp"

namespace streamctl::runtime {

// What one node subtask did over one window of time. Several observations of the same subtask
// (say one per heartbeat over an autoscaler interval) add up: their records and busy time are
// summed over their summed length.
struct Ds2Observation {
  std::string node;
  int subtask = 0;
  double interval_s = 1;  // length of the window, seconds (> 0)
  double records_in = 0;  // records the node read in the window (a source: 0)
  double records_out = 0; // records it passed on (a sink: 0)
  double busy = 0;        // fraction of the window its task was busy, 0..1
};

// The last heartbeat's view of a subtask: its per-second rates and busy fraction (the
// fractions in SubtaskMetrics are of the last second too).
Ds2Observation observation_of(const SubtaskMetrics& m);

// One node's decision and the figures that led to it. Rates are records per second.
struct Ds2NodeDecision {
  std::string node;
  int chain = 0;
  int current = 1;      // parallelism now
  int optimal = 1;      // parallelism DS2 chose (== current when it kept it)
  bool decided = false; // false: not enough data; `reason` says what is missing
  std::string reason;   // one line for logs: why `optimal` is what it is

  int subtasks_observed = 0;
  double observed_in = 0; // summed over subtasks
  double observed_out = 0;
  double busy = 0;    // busy instances: sum of the task's busy fractions
  double true_in = 0; // per instance, per busy second
  double true_out = 0;
  double selectivity = 0;          // observed_out / observed_in (a source: 1)
  std::optional<double> target_in; // unknown when an upstream's target output is
  std::optional<double> target_out;
  std::optional<double> required; // instances, before rounding, hysteresis and clamping

  // One line for the log of a decision: "m: 1 -> 3, target in 2000/s, true rate 1000/s per
  // instance, selectivity 1.00 (needs 2.86 instances at 0.70 utilization)".
  std::string summary() const;
};

struct Ds2Decision {
  std::vector<Ds2NodeDecision> nodes; // in the spec's node order

  // Only the nodes whose parallelism should change.
  std::vector<Ds2NodeDecision> changes() const;
  // The changes as plan_rescale takes them: one "NODE=N" line each; empty for none.
  std::string rescale_request() const;
};

// A source's configured rate: a generator's `rate` when above 0 (records per second for the
// whole source).
std::optional<double> configured_source_rate(const pipeline::NodeSpec& node);

// `source_rates` (records per second, by source name) override configured rates, for a
// controller that knows the demand some other way.
Ds2Decision decide_ds2(const pipeline::PipelineSpec& spec, const pipeline::PhysicalPlan& plan,
                       const std::vector<Ds2Observation>& observations,
                       const AutoscaleSettings& settings,
                       const std::map<std::string, double>& source_rates = {});

} // namespace streamctl::runtime
