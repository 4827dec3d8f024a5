#include "pipeline/runtime/task_chain.hpp"

#include <algorithm>
#include <unordered_map>

#include "pipeline/runtime/checkpoint_restore.hpp"

namespace streamctl::runtime {

using pipeline::NodeRole;

TaskChain::TaskChain(const pipeline::PipelineSpec& spec, const pipeline::PhysicalPlan& plan,
                     const pipeline::Task& task, const operators::Registry& registry,
                     state::FieldNames& names, Warn warn, std::filesystem::path spool_dir,
                     std::string run_tag)
    : spec_(spec) {
  const pipeline::Chain& chain = plan.chains[static_cast<std::size_t>(task.chain)];
  node_indices_ = chain.nodes;
  label_ = pipeline::chain_label(spec, chain) + "[" + std::to_string(task.subtask) + "]";
  key_groups_ = state::key_group_range(task.subtask, chain.parallelism,
                                       static_cast<std::uint32_t>(spec.max_parallelism));
  contexts_.reserve(node_indices_.size());
  for (std::size_t index : node_indices_) {
    const pipeline::NodeSpec& node = spec.nodes[index];
    errors_.push_back(std::make_unique<operators::RecordErrorPolicy>(node, warn));
    operators::OperatorContext ctx;
    ctx.pipeline = &spec;
    ctx.node = &node;
    ctx.subtask = task.subtask;
    ctx.parallelism = chain.parallelism;
    ctx.names = &names;
    ctx.errors = errors_.back().get();
    ctx.checkpoint_dir = spool_dir;
    ctx.warn = warn;
    ctx.run_tag = run_tag;
    // The planner ends a chain at a node whose late output is read, so only the tail has one.
    for (const auto& e : plan.edges)
      if (e.from_node == index && e.from_port == pipeline::kLateOutput) ctx.late_output = &late_;
    if (node.role == NodeRole::Operator) {
      const std::size_t k = operators_.size();
      ctx.pass_on_fired = [this, k](state::Batch& out) { pass_on_fired(k, out); };
    }
    contexts_.push_back(ctx);
    metrics_.push_back(NodeMetrics{node.name});

    switch (node.role) {
    case NodeRole::Source:
      source_ = registry.make_source(spec, node, names);
      source_->open(contexts_.back());
      assigner_ = operators::TimestampAssigner::from_node(node, names);
      break;
    case NodeRole::Operator:
      operators_.push_back(registry.make_operator(spec, node, names));
      operators_.back()->open(contexts_.back());
      break;
    case NodeRole::Sink:
      sink_ = registry.make_sink(spec, node, names);
      sink_->open(contexts_.back());
      break;
    }
  }
  scratch_.resize(operators_.size());
  presence_ = FieldPresence(spec, node_indices_, registry, names);
}

void TaskChain::push(const state::Batch& in, const Emit& emit, int input) {
  StallWatch watch(*this);
  if (source_) metrics_[0].records_out += in.size();
  if (!assigner_) {
    if (source_) offer_to_tap(0, in);
    run_from(0, in, emit, input);
    return;
  }
  stamped_.clear();
  assigner_->assign(in, stamped_, contexts_[0], source_->last_poll_origins());
  offer_to_tap(0, stamped_);
  run_from(0, stamped_, emit);
}

std::optional<std::int64_t> TaskChain::take_source_watermark() {
  if (!assigner_ || assigner_->watermark() <= source_watermark_sent_) return std::nullopt;
  source_watermark_sent_ = assigner_->watermark();
  return source_watermark_sent_;
}

void TaskChain::pass_on_fired(std::size_t k, state::Batch& out) {
  if (firing_emit_ == nullptr || out.empty()) return;
  const std::size_t offset = source_ ? 1 : 0;
  metrics_[offset + k].records_out += out.size();
  offer_to_tap(offset + k, out);
  run_from(k + 1, out, *firing_emit_);
  out.clear();
}

template <typename F> void TaskChain::fire_operator(std::size_t k, const Emit& emit, F&& fire) {
  // Not nested: run_from calls only process(), which never fires.
  firing_emit_ = &emit;
  struct Reset {
    const Emit*& emit;
    ~Reset() { emit = nullptr; }
  } reset{firing_emit_};
  state::Batch fired;
  fire(*operators_[k], fired);
  pass_on_fired(k, fired);
}

void TaskChain::push_watermark(std::int64_t watermark, const Emit& emit) {
  StallWatch watch(*this);
  for (std::size_t k = 0; k < operators_.size(); ++k)
    fire_operator(k, emit, [&](operators::Operator& op, state::Batch& out) {
      op.on_watermark(watermark, out);
    });
  emit_late(emit);
}

void TaskChain::push_processing_time(std::int64_t now_ms, const Emit& emit) {
  StallWatch watch(*this);
  for (std::size_t k = 0; k < operators_.size(); ++k)
    fire_operator(k, emit, [&](operators::Operator& op, state::Batch& out) {
      op.on_processing_time(now_ms, out);
    });
}

void TaskChain::emit_late(const Emit& emit) {
  if (late_.empty()) return;
  emit(late_, pipeline::kLateOutput);
  late_.clear();
}

// Metrics: every node counts what enters it here, and what leaves it.
void TaskChain::run_from(std::size_t first_operator, const state::Batch& in, const Emit& emit, int input) {
  const std::size_t offset = source_ ? 1 : 0; // metrics index of operators_[0]
  const state::Batch* current = &in;
  for (std::size_t k = first_operator; k < operators_.size(); ++k) {
    metrics_[offset + k].records_in += current->size();
    presence_.observe(k, k == 0 ? input : 0, *current);
    scratch_[k].clear();
    if (k == 0) operators_[k]->process_input(input, *current, scratch_[k]);
    else operators_[k]->process(*current, scratch_[k]);
    metrics_[offset + k].records_out += scratch_[k].size();
    offer_to_tap(offset + k, scratch_[k]);
    current = &scratch_[k];
    if (current->empty()) break;
  }
  emit_late(emit);
  if (current->empty()) return;
  if (sink_) {
    metrics_.back().records_in += current->size();
    offer_to_tap(metrics_.size() - 1, *current); // a sink's tap shows what it writes
    sink_->write(*current);
  } else {
    emit(*current, pipeline::kMainOutput);
  }
}

void TaskChain::finish(const Emit& emit) {
  finish_operators(emit);
  finish_sink();
}

void TaskChain::finish_sink() {
  if (sink_) sink_->finish();
}

void TaskChain::finish_operators(const Emit& emit) {
  complete_deferred(); // what ends the chain serialises what is still frozen first
  push_watermark(operators::kWatermarkMax, emit);
  for (std::size_t k = 0; k < operators_.size(); ++k)
    fire_operator(k, emit, [](operators::Operator& op, state::Batch& out) { op.finish(out); });
}

void TaskChain::abort() {
  if (sink_) sink_->abort();
}

void TaskChain::cancel(std::uint64_t completed) {
  if (sink_) sink_->cancel(completed);
}

std::vector<std::string> TaskChain::node_names() const {
  std::vector<std::string> names;
  for (std::size_t index : node_indices_) names.push_back(spec_.nodes[index].name);
  return names;
}

std::vector<operators::Operator*> TaskChain::operators() const {
  std::vector<operators::Operator*> out;
  for (const auto& op : operators_) out.push_back(op.get());
  return out;
}

std::vector<SnapshotSegment> TaskChain::snapshot(std::uint64_t checkpoint_id, bool savepoint,
                                                 const IncrementalSnapshots::Plan* plan) {
  EdgeSegments edges = snapshot_edges(checkpoint_id, savepoint);
  return assemble(std::move(edges), snapshot_operators(plan));
}

TaskChain::EdgeSegments TaskChain::snapshot_edges(std::uint64_t checkpoint_id, bool savepoint) {
  EdgeSegments edges;
  if (source_) {
    SnapshotSegment s{spec_.nodes[node_indices_.front()].name, state::SegmentKind::SourcePosition,
                      state::no_key_group, {}};
    if (savepoint) source_->snapshot_self_contained_position(s.bytes);
    else source_->snapshot_position(s.bytes);
    edges.source = std::move(s);
  }
  if (sink_) {
    SnapshotSegment s{spec_.nodes[node_indices_.back()].name, state::SegmentKind::SinkPending,
                      state::no_key_group, {}};
    sink_->pre_commit(checkpoint_id, s.bytes);
    edges.sink = std::move(s);
  }
  return edges;
}

namespace {

// The segments of operator `op` (named `node`) for snapshot(), in the file's order. With
// `defer`, the groups it writes whole are frozen (Operator::freeze_key_groups) when the operator
// can, their segments left for the writer; `frozen` receives what it returned.
void operator_segments(operators::Operator& op, const std::string& node, std::size_t k, state::KeyGroupRange range,
                       const IncrementalSnapshots::Plan* plan, bool defer,
                       std::vector<std::shared_ptr<state::FrozenKeyGroups>>* frozen,
                       std::vector<SnapshotSegment>& segments) {
  const bool incremental = plan && plan->incremental();
  const std::map<std::uint32_t, std::vector<std::string>>* deltas =
      incremental && k < plan->deltas.size() ? &plan->deltas[k] : nullptr;
  std::vector<std::uint32_t> whole;       // deferred: the groups written whole ...
  std::vector<std::size_t> whole_segment; // ... and their segments' places
  // The deltas the operator copied as it took their changes, serialised by the writer (in
  // either mode: a copy is never changed by the task).
  std::shared_ptr<state::FrozenKeyGroups> delta_copies;
  std::unordered_map<std::uint32_t, std::size_t> delta_copy_index;
  // Deferred: called at every barrier, so that the operator settles a take it left unresolved
  // (Operator::take_changed_entries) whatever the plan made of it.
  if (defer || (deltas && !deltas->empty() && k < plan->deltas_of_this_take.size())) {
    state::DeltaKeys wanted;
    if (deltas && k < plan->deltas_of_this_take.size())
      for (std::uint32_t group : plan->deltas_of_this_take[k])
        if (auto d = deltas->find(group); d != deltas->end() && range.contains(group))
          wanted.emplace_back(group, &d->second);
    if ((delta_copies = op.defer_key_group_deltas(wanted))) {
      for (std::size_t i = 0; i < delta_copies->size(); ++i) delta_copy_index.emplace(delta_copies->group(i), i);
      // Groups frozen to be resolved later: thawed, and their stalls counted, like whole ones.
      if (frozen && !delta_copies->settled()) frozen->push_back(delta_copies);
    }
  }
  auto write_group = [&](std::uint32_t group) {
    if (auto c = delta_copy_index.find(group); c != delta_copy_index.end()) {
      SnapshotSegment s{node, state::SegmentKind::KeyedDelta, group, {}};
      s.frozen = delta_copies;
      s.frozen_index = c->second;
      segments.push_back(std::move(s));
      return;
    }
    // A delta without keys is one the take left unresolved and the operator did not defer
    // (it must, Operator::take_changed_entries): whole, as a safe fallback.
    if (deltas)
      if (auto d = deltas->find(group); d != deltas->end() && !d->second.empty()) {
        SnapshotSegment s{node, state::SegmentKind::KeyedDelta, group, {}};
        if (op.snapshot_key_group_delta(group, d->second, s.bytes)) {
          segments.push_back(std::move(s));
          return;
        }
      }
    SnapshotSegment s{node, state::SegmentKind::Keyed, group, {}};
    if (defer) {
      whole.push_back(group);
      whole_segment.push_back(segments.size());
      s.keep_empty = incremental;
      segments.push_back(std::move(s));
      return;
    }
    op.snapshot_key_group(group, s.bytes);
    if (incremental || !s.bytes.empty()) segments.push_back(std::move(s));
  };
  if (incremental && k < plan->groups.size() && plan->groups[k]) {
    for (std::uint32_t group : *plan->groups[k])
      if (range.contains(group)) write_group(group);
  } else {
    for (std::uint32_t group = range.first; group < range.end; ++group) write_group(group);
  }
  if (defer && !whole.empty()) {
    if (auto f = op.freeze_key_groups(whole)) {
      for (std::size_t i = 0; i < whole.size(); ++i) {
        segments[whole_segment[i]].frozen = f;
        segments[whole_segment[i]].frozen_index = i;
      }
      frozen->push_back(std::move(f));
    } else { // the operator defers nothing: written now, as without `defer`
      for (std::size_t i = 0; i < whole.size(); ++i) op.snapshot_key_group(whole[i], segments[whole_segment[i]].bytes);
      if (!incremental)
        std::erase_if(segments, [](const SnapshotSegment& s) {
          return s.kind == state::SegmentKind::Keyed && s.bytes.empty() && !s.frozen;
        });
    }
  }
  SnapshotSegment s{node, state::SegmentKind::Subtask, state::no_key_group, {}};
  op.snapshot_subtask_state(s.bytes);
  if (!s.bytes.empty()) segments.push_back(std::move(s));
}

} // namespace

std::vector<SnapshotSegment> TaskChain::snapshot_operators(const IncrementalSnapshots::Plan* plan) const {
  std::vector<SnapshotSegment> segments;
  const std::size_t offset = source_ ? 1 : 0;
  for (std::size_t k = 0; k < operators_.size(); ++k) {
    if (!operators_[k]->has_state()) continue;
    operator_segments(*operators_[k], spec_.nodes[node_indices_[offset + k]].name, k, key_groups_, plan,
                      /*defer=*/false, nullptr, segments);
  }
  return segments;
}

std::vector<SnapshotSegment> TaskChain::snapshot_operators_deferred(std::uint64_t checkpoint_id,
                                                                    const IncrementalSnapshots::Plan* plan) {
  complete_deferred();
  if (!deferral_.frozen.empty()) {
    past_stalls_[deferral_.checkpoint_id] = deferral_.stalls;
    while (past_stalls_.size() > 8) past_stalls_.erase(past_stalls_.begin());
  }
  deferral_ = Deferral{};
  deferral_.checkpoint_id = checkpoint_id;
  std::vector<SnapshotSegment> segments;
  const std::size_t offset = source_ ? 1 : 0;
  for (std::size_t k = 0; k < operators_.size(); ++k) {
    if (!operators_[k]->has_state()) continue;
    // An empty group in a full snapshot has no segment: a segment per operator and group
    // at most, so the erase in operator_segments only ever meets this operator's.
    std::vector<SnapshotSegment> own;
    operator_segments(*operators_[k], spec_.nodes[node_indices_[offset + k]].name, k, key_groups_, plan,
                      /*defer=*/true, &deferral_.frozen, own);
    for (auto& segment : own) segments.push_back(std::move(segment));
  }
  for (const auto& f : deferral_.frozen) deferral_.stalls.groups += f->size();
  deferral_.unsettled = !deferral_.frozen.empty();
  return segments;
}

std::chrono::nanoseconds TaskChain::deferral_stalled() const {
  std::chrono::nanoseconds total{0};
  for (const auto& f : deferral_.frozen) total += f->stalls().total;
  return total;
}

TaskChain::StallWatch::StallWatch(TaskChain& chain) : chain_(chain) {
  if (!chain_.deferral_.unsettled) return;
  active_ = true;
  before_ = chain_.deferral_stalled();
}

TaskChain::StallWatch::~StallWatch() {
  if (!active_) return;
  Deferral& d = chain_.deferral_;
  const std::chrono::nanoseconds now = chain_.deferral_stalled();
  d.stalls.longest = std::max(d.stalls.longest, now - before_);
  d.stalls.total = now;
  d.stalls.groups_by_task = d.stalls.groups_copied = d.stalls.copied_bytes = 0;
  d.stalls.waited = {};
  for (const auto& f : d.frozen) {
    d.stalls.waited += f->stalls().waited;
    d.stalls.groups_by_task += f->stalls().groups_by_task;
    d.stalls.groups_copied += f->stalls().groups_copied;
    d.stalls.copied_bytes += f->stalls().copied_bytes;
  }
  d.unsettled = std::any_of(d.frozen.begin(), d.frozen.end(), [](const auto& f) { return !f->settled(); });
}

std::size_t TaskChain::complete_deferred() {
  if (!deferral_.unsettled) return 0;
  const auto thawed = [&] { return deferral_.stalls.groups_by_task + deferral_.stalls.groups_copied; };
  const std::size_t before = thawed();
  {
    StallWatch watch(*this);
    for (const auto& f : deferral_.frozen) f->thaw_all();
  }
  const std::size_t late = thawed() - before;
  deferral_.stalls.late_groups += late;
  return late;
}

std::optional<TaskChain::DeferredStalls> TaskChain::deferred_stalls(std::uint64_t checkpoint_id) const {
  if (!deferral_.frozen.empty() && deferral_.checkpoint_id == checkpoint_id) return deferral_.stalls;
  if (auto it = past_stalls_.find(checkpoint_id); it != past_stalls_.end()) return it->second;
  return std::nullopt;
}

std::vector<SnapshotSegment> TaskChain::assemble(EdgeSegments edges, std::vector<SnapshotSegment> operators) {
  std::vector<SnapshotSegment> segments;
  segments.reserve(operators.size() + 2);
  if (edges.source) segments.push_back(std::move(*edges.source));
  for (auto& s : operators) segments.push_back(std::move(s));
  if (edges.sink) segments.push_back(std::move(*edges.sink));
  return segments;
}

void TaskChain::commit(std::uint64_t checkpoint_id) {
  if (sink_) sink_->commit(checkpoint_id);
}

namespace {
std::vector<std::string_view> views_of(const std::vector<std::string>& all) {
  return std::vector<std::string_view>(all.begin(), all.end());
}
[[noreturn]] void restore_failed(const std::string& node, const std::string& why) {
  throw Error(ErrorKind::Snapshot, "cannot restore the state of '" + node + "': " + why);
}

// The key groups of `range` that `op` takes from `donor`'s operator of the same node, installed
// now; true at a group's index (from range.first) when it was. Stops at the first the
// operator cannot take: that one and the rest are read from the checkpoint.
std::vector<bool> take_kept_groups(const std::string& node, state::KeyGroupRange range,
                                          operators::Operator& op, TaskChain& donor) {
  std::vector<bool> taken(range.size(), false);
  operators::Operator* from = donor.operator_of(node);
  if (from == nullptr || !from->has_state()) return taken;
  const state::KeyGroupRange kept = donor.key_groups();
  for (std::uint32_t g = std::max(range.first, kept.first); g < std::min(range.end, kept.end); ++g) {
    auto load = op.take_key_group_from(*from, g);
    if (!load) break;
    if (auto ok = load->install(); !ok) restore_failed(node, "key group " + std::to_string(g) + ": " + ok.error());
    taken[g - range.first] = true;
  }
  return taken;
}

} // namespace

operators::Operator* TaskChain::operator_of(const std::string& name) const {
  const std::size_t offset = source_ ? 1 : 0;
  for (std::size_t position = offset; position < node_indices_.size(); ++position)
    if (position - offset < operators_.size() && spec_.nodes[node_indices_[position]].name == name)
      return operators_[position - offset].get();
  return nullptr;
}

std::size_t TaskChain::restore(CheckpointRestore& restore, TaskChain* donor) {
  const std::size_t offset = source_ ? 1 : 0;
  std::size_t kept_groups = 0;
  for (std::size_t position = 0; position < node_indices_.size(); ++position) {
    const std::string& name = spec_.nodes[node_indices_[position]].name;
    if (!restore.has_node(name)) continue; // a node new in this pipeline starts empty
    auto subtask_state = [&](state::SegmentKind kind) {
      auto all = restore.per_subtask(name, kind);
      if (!all) restore_failed(name, all.error());
      return std::move(*all);
    };
    if (position == 0 && source_) {
      auto positions = subtask_state(state::SegmentKind::SourcePosition);
      if (auto ok = source_->restore_position(views_of(positions)); !ok) restore_failed(name, ok.error());
      continue;
    }
    if (sink_ && position == node_indices_.size() - 1) {
      auto pending = subtask_state(state::SegmentKind::SinkPending);
      if (auto ok = sink_->restore_pending(views_of(pending)); !ok) restore_failed(name, ok.error());
      continue;
    }
    operators::Operator& op = *operators_[position - offset];
    if (!op.has_state()) continue;
    std::vector<bool> taken = donor ? take_kept_groups(name, key_groups_, op, *donor) : std::vector<bool>{};
    kept_groups += static_cast<std::size_t>(std::count(taken.begin(), taken.end(), true));
    const auto skip = [&](std::uint32_t g) { return !taken.empty() && taken[g - key_groups_.first]; };
    if (auto ok = restore_key_groups(restore, name, key_groups_, op, skip); !ok) restore_failed(name, ok.error());
    auto subtasks = subtask_state(state::SegmentKind::Subtask);
    if (auto ok = op.restore_subtask_state(views_of(subtasks)); !ok) restore_failed(name, ok.error());
  }
  return kept_groups;
}

std::vector<NodeMetrics> TaskChain::metrics(StateFigures state) const {
  std::vector<NodeMetrics> out = metrics_;
  for (std::size_t k = 0; k < out.size(); ++k) out[k].bad_records = errors_[k]->count();
  if (state == StateFigures::none) return out;
  const auto now = std::chrono::steady_clock::now();
  if (state == StateFigures::current || footprints_.size() != operators_.size() || now >= footprints_due_) {
    footprints_.clear();
    for (const auto& op : operators_) footprints_.push_back(op->state_footprint());
    // The next walk waits 100 times as long as this one took: at most 1% of the task's time.
    footprints_due_ = now + 100 * (std::chrono::steady_clock::now() - now);
  }
  const std::size_t offset = source_ ? 1 : 0;
  for (std::size_t k = 0; k < operators_.size(); ++k) {
    out[offset + k].state_entries = footprints_[k].entries;
    out[offset + k].state_bytes = footprints_[k].bytes;
  }
  return out;
}

} // namespace streamctl::runtime
