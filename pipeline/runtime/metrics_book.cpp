#include "pipeline/runtime/metrics_book.hpp"

#include <algorithm>

#include "pipeline/runtime/checkpoint_metadata.hpp"
#include "pipeline/runtime/job_metrics.hpp"

namespace streamctl::runtime {

namespace {

void add_counts(NodeMetrics& to, const NodeMetrics& from) {
  to.records_in += from.records_in;
  to.records_out += from.records_out;
  to.bad_records += from.bad_records;
}

double per_second(std::uint64_t later, std::uint64_t earlier, double seconds) {
  return seconds > 0 && later >= earlier ? static_cast<double>(later - earlier) / seconds : 0.0;
}

double fraction(std::uint64_t part_later, std::uint64_t part_earlier, std::uint64_t whole_later,
                std::uint64_t whole_earlier) {
  if (whole_later <= whole_earlier || part_later < part_earlier) return 0.0;
  return std::min(1.0, static_cast<double>(part_later - part_earlier) /
                           static_cast<double>(whole_later - whole_earlier));
}

const NodeMetrics* find_node(const std::vector<NodeMetrics>& metrics, const std::string& node) {
  for (const auto& m : metrics)
    if (m.node == node) return &m;
  return nullptr;
}

// The report to measure "the last minute" from: the oldest within it.
const TaskRuntime::Report* minute_ago(const std::deque<TaskRuntime::Report>& history, Clock::time_point now) {
  for (const auto& r : history)
    if (now - r.at <= std::chrono::seconds(61)) return &r;
  return nullptr;
}

} // namespace

void MetricsBook::begin_attempt(const LoadedJob& job, const std::filesystem::path& restored_from,
                                const std::string& job_id, spdlog::logger& log) {
  carried_.clear();
  if (restored_from.empty()) return;
  auto metadata = read_metadata(restored_from);
  if (!metadata) return; // the restore itself reports it
  if (metadata->job_id != job_id) return;
  for (const auto& task : metadata->tasks) {
    if (task.counts.empty()) continue;
    for (const auto& m : decode_metrics(task.counts)) {
      const pipeline::NodeSpec* node = job.spec.find(m.node);
      if (node == nullptr) continue;
      int subtask = task.subtask % std::max(1, job.spec.parallelism_of(*node));
      auto [it, inserted] = carried_.try_emplace({m.node, subtask}, NodeMetrics{m.node});
      add_counts(it->second, m);
    }
  }
  if (!carried_.empty())
    log.debug("metrics: counters carried from {}", restored_from.string());
}

const NodeMetrics* MetricsBook::carried(const std::string& node, int subtask) const {
  auto it = carried_.find({node, subtask});
  return it == carried_.end() ? nullptr : &it->second;
}

std::string MetricsBook::checkpoint_counts(int subtask, std::string_view attempt_counts) const {
  auto counts = decode_metrics(attempt_counts);
  for (auto& m : counts) {
    if (const NodeMetrics* base = carried(m.node, subtask)) add_counts(m, *base);
    // State figures are of the moment, not the checkpoint's concern.
    m.state_entries = m.state_bytes = 0;
  }
  return encode_metrics(counts);
}

std::vector<std::vector<NodeMetrics>> MetricsBook::totals(const LoadedJob& job, const std::vector<TaskRuntime>& tasks) const {
  std::vector<std::vector<NodeMetrics>> out;
  for (const auto& t : tasks) {
    std::vector<NodeMetrics> task;
    // Every node of the chain, so that a task that has not reported yet still shows what
    // its checkpoint covered.
    for (std::size_t n : job.plan.chains[static_cast<std::size_t>(t.task->chain)].nodes) {
      const std::string& name = job.spec.nodes[n].name;
      NodeMetrics m{name};
      if (const NodeMetrics* reported = find_node(t.metrics, name)) m = *reported;
      if (const NodeMetrics* base = carried(name, t.task->subtask)) add_counts(m, *base);
      task.push_back(std::move(m));
    }
    out.push_back(std::move(task));
  }
  return out;
}

JobMetrics MetricsBook::view(const LoadedJob& job, const std::vector<TaskRuntime>& tasks, const JobFacts& facts,
                             Clock::time_point now, std::int64_t now_ms) const {
  JobMetrics out;
  out.job_id = facts.job_id;
  out.job_name = job.spec.name;
  out.state = facts.state;
  out.restarts = facts.restarts;
  out.checkpoints_completed = facts.checkpoints_completed;
  out.checkpoints_failed = facts.checkpoints_failed;
  for (std::size_t n = 0; n < job.spec.nodes.size(); ++n) {
    const pipeline::NodeSpec& node = job.spec.nodes[n];
    for (const auto& t : tasks) {
      const auto& chain = job.plan.chains[static_cast<std::size_t>(t.task->chain)];
      if (std::find(chain.nodes.begin(), chain.nodes.end(), n) == chain.nodes.end()) continue;
      SubtaskMetrics s;
      s.node = node.name;
      s.type = node.type;
      s.subtask = t.task->subtask;
      s.parallelism = chain.parallelism;
      s.host = t.host.empty() ? "localhost" : t.host;
      // On another host the local child is the worker's ssh: show the worker's own pid there.
      s.pid = t.host.empty() || t.worker_pid == 0 ? (t.process ? t.process->pid() : 0) : t.worker_pid;

      NodeMetrics counts{node.name};
      if (const NodeMetrics* now_counts = find_node(t.metrics, node.name)) counts = *now_counts;
      s.state_entries = counts.state_entries;
      s.state_bytes = counts.state_bytes;
      if (const NodeMetrics* base = carried(node.name, t.task->subtask)) add_counts(counts, *base);
      s.records_in = counts.records_in;
      s.records_out = counts.records_out;
      s.bad_records = counts.bad_records;
      // The task's channels belong to the ends of its chain.
      if (chain.nodes.front() == n) s.bytes_in = t.load.bytes_in;
      if (chain.nodes.back() == n) s.bytes_out = t.load.bytes_out;

      if (t.history.size() >= 2) {
        const auto& last = t.history.back();
        const auto& before = t.history[t.history.size() - 2];
        const double seconds = std::chrono::duration<double>(last.at - before.at).count();
        const NodeMetrics* a = find_node(before.metrics, node.name);
        const NodeMetrics* b = find_node(last.metrics, node.name);
        if (a && b) {
          s.records_in_per_s = per_second(b->records_in, a->records_in, seconds);
          s.records_out_per_s = per_second(b->records_out, a->records_out, seconds);
        }
        const TaskLoad& l1 = last.load;
        const TaskLoad& l0 = before.load;
        const std::uint64_t whole = (l1.busy_ms + l1.idle_ms + l1.backpressured_ms);
        const std::uint64_t whole0 = (l0.busy_ms + l0.idle_ms + l0.backpressured_ms);
        s.busy = fraction(l1.busy_ms, l0.busy_ms, whole, whole0);
        s.idle = fraction(l1.idle_ms, l0.idle_ms, whole, whole0);
        s.backpressured = fraction(l1.backpressured_ms, l0.backpressured_ms, whole, whole0);
        s.input_queue = fraction(l1.input_waiting, l0.input_waiting, l1.input_polls, l0.input_polls);
        s.output_queue = fraction(l1.output_full, l0.output_full, l1.output_sends, l0.output_sends);
        if (const TaskRuntime::Report* first = minute_ago(t.history, now); first && first != &last) {
          const double minute = std::chrono::duration<double>(last.at - first->at).count();
          const NodeMetrics* f = find_node(first->metrics, node.name);
          if (f && b) {
            s.records_in_per_s_1m = per_second(b->records_in, f->records_in, minute);
            s.records_out_per_s_1m = per_second(b->records_out, f->records_out, minute);
          }
        }
      }
      // No watermark yet, or the end of input's (+infinity): nothing to show.
      if (t.load.watermark && *t.load.watermark > INT64_MIN / 2 && *t.load.watermark < INT64_MAX / 2) {
        s.watermark_ms = *t.load.watermark;
        s.watermark_lag_ms = now_ms - *t.load.watermark;
      }
      s.last_checkpoint = t.last_checkpoint;
      for (const auto& [name, figures] : t.latency)
        if (name == node.name) s.latency = figures;
      out.subtasks.push_back(std::move(s));
    }
  }
  return out;
}

} // namespace streamctl::runtime
