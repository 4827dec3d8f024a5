#pragma once
// The fused chain of node subtasks that one worker runs: an optional source at the head,
// operators, and an optional sink at the tail. Batches move through it in memory, with no
// serialisation; what leaves the tail towards other chains goes to `emit`.
//
// Threading: used by the worker's one task thread.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "operators/event_time.hpp"
#include "operators/record_error_policy.hpp"
#include "operators/registry.hpp"
#include "pipeline/runtime/field_presence.hpp"
#include "pipeline/runtime/incremental_snapshots.hpp"
#include "pipeline/runtime/record_tap.hpp"
#include "pipeline/spec/plan.hpp"
#include "state/frozen_key_groups.hpp"
#include "state/key_group.hpp"
#include "state/snapshot_format.hpp"

namespace streamctl::runtime {

class CheckpointRestore;

// One segment of a task's snapshot: serialised on the task thread, compressed and written by
// the background writer (state/snapshot_format.hpp).
struct SnapshotSegment {
  std::string node;
  state::SegmentKind kind = state::SegmentKind::Keyed;
  std::uint32_t key_group = state::no_key_group;
  std::string bytes;
  // Deferred snapshots: when set, `bytes` is empty and the segment's bytes are those of
  // frozen->take(frozen_index), serialised later (state/frozen_key_groups.hpp); a full snapshot
  // writes no segment for a group that turns out empty (`keep_empty` false), as snapshot() does.
  std::shared_ptr<state::FrozenKeyGroups> frozen;
  std::size_t frozen_index = 0;
  bool keep_empty = true;
};

struct NodeMetrics {
  std::string node;
  std::uint64_t records_in = 0;
  std::uint64_t records_out = 0;
  std::uint64_t bad_records = 0;
  // The node's state now (operators::StateFootprint); a gauge, not a counter.
  std::uint64_t state_entries = 0;
  std::uint64_t state_bytes = 0;
};

class TaskChain {
public:
  // Receives what leaves the chain's tail, with the port it leaves from
  // (pipeline::kMainOutput, or kLateOutput for a window's late records).
  using Emit = std::function<void(const state::Batch&, int port)>;
  using Warn = operators::RecordErrorPolicy::Warn;

  // `spool_dir`: where sources that cannot seek keep what they read (empty: the job takes no
  // checkpoints); `run_tag`: names the run in the files its attempts share
  // (OperatorContext::run_tag).
  TaskChain(const pipeline::PipelineSpec& spec, const pipeline::PhysicalPlan& plan,
            const pipeline::Task& task, const operators::Registry& registry,
            state::FieldNames& names, Warn warn, std::filesystem::path spool_dir = {}, std::string run_tag = {});
  // Operators hold callbacks into the chain (OperatorContext::pass_on_fired): it stays put.
  TaskChain(const TaskChain&) = delete;
  TaskChain& operator=(const TaskChain&) = delete;

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
  // The job was cancelled or restarts: discard every output not committed but what was
  // prepared for checkpoint `completed` (the coordinator's newest) and before (Sink::cancel).
  void cancel(std::uint64_t completed);

  // --- Checkpoints (SPEC §7) ---
  // The key groups this subtask owns.
  state::KeyGroupRange key_groups() const { return key_groups_; }
  std::vector<std::string> node_names() const;
  // The chain's state for checkpoint `checkpoint_id`, between batches: the source's
  // position, each operator's key groups and subtask state, and the sink's pre-commit (which
  // closes its output in progress, so it is called once per checkpoint).
  // `savepoint`: the source writes a self-contained position (Source::
  // snapshot_self_contained_position), which needs no file outside the snapshot.
  // `plan` (incremental checkpoints): which key groups to write; a group written in an
  // incremental snapshot gets a segment even when empty (it replaces an older file's).
  // Of those, the plan's deltas are written as keyed_delta segments unless the operator finds
  // the whole group smaller.
  std::vector<SnapshotSegment> snapshot(std::uint64_t checkpoint_id, bool savepoint = false,
                                        const IncrementalSnapshots::Plan* plan = nullptr);
  // snapshot() in two parts, for a snapshot whose operator state is serialised elsewhere
  // (forked_snapshot.hpp): the source's position and the sink's pre-commit, which change the
  // chain (so in the task), and the operators' state, which reads it only (so in a child
  // process too). assemble() orders them as snapshot() does.
  struct EdgeSegments {
    std::optional<SnapshotSegment> source;
    std::optional<SnapshotSegment> sink;
  };
  EdgeSegments snapshot_edges(std::uint64_t checkpoint_id, bool savepoint);
  std::vector<SnapshotSegment> snapshot_operators(const IncrementalSnapshots::Plan* plan) const;
  static std::vector<SnapshotSegment> assemble(EdgeSegments edges, std::vector<SnapshotSegment> operators);

  // Deferred snapshots ([checkpoint] snapshot = "deferred"): snapshot_operators, but the key
  // groups written whole by an operator that can defer them (Operator::freeze_key_groups) are
  // frozen at their state now, and their segments carry what serialises them later
  // (SnapshotSegment::frozen): on the snapshot writer's thread, or on the task's when the task
  // is about to change one first (state/frozen_key_groups.hpp). Deltas, the groups of other
  // operators and subtask state are serialised now. Completes an earlier deferred snapshot
  // first (complete_deferred). The file's bytes are those snapshot() would give now.
  std::vector<SnapshotSegment> snapshot_operators_deferred(std::uint64_t checkpoint_id,
                                                           const IncrementalSnapshots::Plan* plan);
  // Serialises or copies, on the task thread, every group of the last deferred snapshot that is still
  // frozen (waiting for one the writer is at): before what ends or hands over the chain, and
  // before the next snapshot. Its time counts as a stall of that snapshot. Returns how many
  // groups the task serialised or copied (operators that can copy a group copy it).
  std::size_t complete_deferred();
  // What the deferred groups of checkpoint `id` have cost the task since its barrier, once its
  // file is written (nullopt: none deferred, or too long ago): the longest time one batch,
  // watermark, timer tick or call of complete_deferred was held serialising frozen groups or
  // waiting for the writer, the time in all, and the groups the task serialised itself (of
  // which `late_groups` by the next snapshot or the end of input) or copied (copy-on-first-write).
  struct DeferredStalls {
    std::chrono::nanoseconds longest{0};
    std::chrono::nanoseconds total{0};
    std::chrono::nanoseconds waited{0}; // of total: waiting while the writer serialised a group
    std::size_t groups = 0;         // deferred
    std::size_t groups_by_task = 0; // of those, serialised by the task
    std::size_t groups_copied = 0;  // ... copied by the task, for the writer to serialise
    std::size_t copied_bytes = 0;   // what those copies held
    std::size_t late_groups = 0;    // serialised or copied by complete_deferred
  };
  std::optional<DeferredStalls> deferred_stalls(std::uint64_t checkpoint_id) const;
  // The chain's operators (not the source or sink), in chain order: what a Plan's groups index.
  std::vector<operators::Operator*> operators() const;
  // The operator of node `name` in this chain; nullptr when it has none (or it is the source
  // or the sink).
  operators::Operator* operator_of(const std::string& name) const;
  // The checkpoint `checkpoint_id` completed: the sink publishes what it prepared for it.
  void commit(std::uint64_t checkpoint_id);
  // Before the first record: takes this subtask's share of the state in `restore`. Throws
  // Error(Snapshot) naming the node when a segment cannot be read or an operator refuses it.
  // `donor`: the chain this worker ran before a rescale kept it, whose operators hold exactly
  // the state of `restore` (worker.cpp checks that): the key groups both own move from its
  // operators of the same node (Operator::take_key_group_from) rather than being read, and
  // leave it. Returns how many groups moved so.
  std::size_t restore(CheckpointRestore& restore, TaskChain* donor = nullptr);
  // All input has ended: operators emit what they hold, but the sink does not publish yet
  // (finish_sink does, once the whole job has finished), so that a restart before then
  // publishes nothing twice.
  void finish_operators(const Emit& emit);
  void finish_sink();
  // Sink::check_output of the chain's sink, if it has one.
  void check_sink_output() {
    if (sink_) sink_->check_output();
  }

  // Every node's counters, and what each operator holds as `state` says: measuring the state
  // walks it (some operators visit every entry), so `recent` reuses the last figures until a
  // new walk is due, which keeps the walks under about 1% of the task's time at any state size.
  enum class StateFigures { none, recent, current };
  std::vector<NodeMetrics> metrics(StateFigures state = StateFigures::none) const;
  // Copies of the records leaving each node go to `tap` while it has a tap open
  // (record_tap.hpp); `tap` must outlive the chain. None: no copies.
  void set_tap(RecordTap* tap) { tap_ = tap; }

  // Which read fields the operators' first input records lacked (field_presence.hpp).
  const FieldPresence& field_presence() const { return presence_; }

private:
  // The last deferred snapshot's frozen groups and what they cost the task so far.
  struct Deferral {
    std::uint64_t checkpoint_id = 0;
    std::vector<std::shared_ptr<state::FrozenKeyGroups>> frozen;
    bool unsettled = false; // some group may still be frozen
    DeferredStalls stalls;
  };
  // Measures what one task operation (a batch, a watermark, a tick) stalled on frozen groups.
  class StallWatch {
  public:
    explicit StallWatch(TaskChain& chain);
    ~StallWatch();
    StallWatch(const StallWatch&) = delete;
    StallWatch& operator=(const StallWatch&) = delete;

  private:
    TaskChain& chain_;
    bool active_ = false;
    std::chrono::nanoseconds before_{0};
  };
  std::chrono::nanoseconds deferral_stalled() const;

  void run_from(std::size_t first_operator, const state::Batch& in, const Emit& emit, int input = 0);
  // Sends the late records the tail collected, if any.
  void emit_late(const Emit& emit);
  // Runs the time-driven call `fire` (on_watermark, on_processing_time or finish) of
  // operators_[k], passing its output downstream: in chunks when the operator hands them over
  // with pass_on_fired, the rest when it returns.
  template <typename F> void fire_operator(std::size_t k, const Emit& emit, F&& fire);
  // What operators_[k]'s pass_on_fired does: while firing_emit_ is set, passes `out` on.
  void pass_on_fired(std::size_t k, state::Batch& out);
  // Offers the batch leaving the node at chain `position` to the tap, if one is open.
  void offer_to_tap(std::size_t position, const state::Batch& batch) {
    if (tap_ != nullptr && tap_->active()) tap_->offer(position, batch);
  }

  const pipeline::PipelineSpec& spec_;
  RecordTap* tap_ = nullptr;
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
  mutable std::vector<operators::StateFootprint> footprints_; // per operator, the last walk's
  mutable std::chrono::steady_clock::time_point footprints_due_{};
  state::KeyGroupRange key_groups_;
  const Emit* firing_emit_ = nullptr; // set during fire_operator only
  FieldPresence presence_;
  Deferral deferral_;
  std::map<std::uint64_t, DeferredStalls> past_stalls_; // of the last few deferrals
};

} // namespace streamctl::runtime
