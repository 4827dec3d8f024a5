#pragma once
// The fused chain of node subtasks that one worker runs: an optional source at the head,
// operators, and an optional sink at the tail. Batches move through it in memory, with no
// serialisation; what leaves the tail towards other chains goes to `emit`.
//
// Threading: used by the worker's one task thread.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "operators/event_time.hpp"
#include "operators/record_error_policy.hpp"
#include "operators/registry.hpp"
#include "pipeline/spec/plan.hpp"

namespace streamctl::runtime {

struct NodeMetrics {
  std::string node;
  std::uint64_t records_in = 0;
  std::uint64_t records_out = 0;
  std::uint64_t bad_records = 0;
};

class TaskChain {
public:
  // Receives what leaves the chain's tail, with the port it leaves from
  // (pipeline::kMainOutput, or kLateOutput for a window's late records).
  using Emit = std::function<void(const state::Batch&, int port)>;
  using Warn = operators::RecordErrorPolicy::Warn;

  TaskChain(const pipeline::PipelineSpec& spec, const pipeline::PhysicalPlan& plan,
            const pipeline::Task& task, const operators::Registry& registry,
            state::FieldNames& names, Warn warn);

  operators::Source* source() { return source_.get(); }
  bool has_sink() const { return sink_ != nullptr; }
  // A readable label for messages: "clicks -> ok -> out[1]".
  const std::string& label() const { return label_; }

  // Runs a batch that the head received: from the source, or from an input channel carrying
  // the head's input number `input` (a join tells its two inputs apart). A source with
  // `event_time` stamps it first.
  void push(const state::Batch& in, const Emit& emit, int input = 0);
  // The source's watermark, when it has advanced since the last call (then pass it on with
  // push_watermark and to the outputs).
  std::optional<std::int64_t> take_source_watermark();
  std::int64_t source_idle_timeout_ms() const { return assigner_ ? assigner_->idle_timeout_ms() : 0; }
  // Lets every operator of the chain react to a new watermark, in chain order.
  void push_watermark(std::int64_t watermark, const Emit& emit);
  // Lets every operator fire its processing-time timers up to `now_ms`.
  void push_processing_time(std::int64_t now_ms, const Emit& emit);
  // All input has ended: the watermark goes to +infinity, so every window fires; operators emit
  // what they hold, in chain order; then the sink commits.
  void finish(const Emit& emit);
  void abort();

  std::vector<NodeMetrics> metrics() const;

private:
  void run_from(std::size_t first_operator, const state::Batch& in, const Emit& emit, int input = 0);
  // Sends the late records the tail collected, if any.
  void emit_late(const Emit& emit);

  const pipeline::PipelineSpec& spec_;
  std::string label_;
  std::vector<std::size_t> node_indices_;
  std::vector<std::unique_ptr<operators::RecordErrorPolicy>> errors_; // one per node
  std::vector<operators::OperatorContext> contexts_;
  std::unique_ptr<operators::Source> source_;
  std::unique_ptr<operators::TimestampAssigner> assigner_;
  state::Batch stamped_;
  std::int64_t source_watermark_sent_ = operators::kWatermarkMin;
  std::vector<std::unique_ptr<operators::Operator>> operators_;
  std::unique_ptr<operators::Sink> sink_;
  std::vector<state::Batch> scratch_; // output batch of each operator
  state::Batch late_;                 // late records of the tail, when its late output is read
  std::vector<NodeMetrics> metrics_;  // one per node, chain order
};

} // namespace streamctl::runtime
