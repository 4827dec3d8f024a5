#include "pipeline/runtime/prometheus_text.hpp"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <optional>
#include <variant>

namespace streamctl::runtime {

namespace {

// Counters print as integers (exact beyond 2^53), the rest as the shortest double that reads
// back the same.
using Value = std::variant<std::uint64_t, double>;
using Extract = std::optional<Value> (*)(const SubtaskMetrics&);

// One metric family with one sample per node subtask. The help texts hold no backslash and
// no newline, so they go out as they are.
struct Family {
  std::string_view name; // without the streamctl_ prefix
  std::string_view type;
  std::string_view help;
  Extract value; // nullopt: this subtask has no sample
};

double seconds(std::uint64_t ms) {
  return static_cast<double>(ms) / 1000.0;
}
double seconds(std::int64_t ms) {
  return static_cast<double>(ms) / 1000.0;
}

std::optional<Value> checkpoint_figure(const SubtaskMetrics& s, Value v) {
  if (s.last_checkpoint.id == 0) return std::nullopt; // none completed yet
  return v;
}

const Family kSubtaskFamilies[] = {
    {"records_in_total", "counter",
     "Records the node subtask read (a source: 0), job total through restarts.",
     [](const SubtaskMetrics& s) -> std::optional<Value> { return s.records_in; }},
    {"records_out_total", "counter",
     "Records the node subtask passed on (a sink: 0), job total through restarts.",
     [](const SubtaskMetrics& s) -> std::optional<Value> { return s.records_out; }},
    {"bad_records_total", "counter",
     "Records the node subtask handed to on_error, job total through restarts.",
     [](const SubtaskMetrics& s) -> std::optional<Value> { return s.bad_records; }},
    {"bytes_in_total", "counter",
     "Bytes received over the task's input channels, at the first node of a fused chain (else 0).",
     [](const SubtaskMetrics& s) -> std::optional<Value> { return s.bytes_in; }},
    {"bytes_out_total", "counter",
     "Bytes sent over the task's output channels, at the last node of a fused chain (else 0).",
     [](const SubtaskMetrics& s) -> std::optional<Value> { return s.bytes_out; }},
    {"busy_ratio", "gauge",
     "Fraction of the last second the subtask's task spent handling records or timers.",
     [](const SubtaskMetrics& s) -> std::optional<Value> { return s.busy; }},
    {"idle_ratio", "gauge",
     "Fraction of the last second the subtask's task spent waiting for input.",
     [](const SubtaskMetrics& s) -> std::optional<Value> { return s.idle; }},
    {"backpressured_ratio", "gauge",
     "Fraction of the last second the subtask's task spent waiting for room in an output channel.",
     [](const SubtaskMetrics& s) -> std::optional<Value> { return s.backpressured; }},
    {"input_queue_ratio", "gauge", "Fill of the task's input queue, 0 to 1 (0 where it has none).",
     [](const SubtaskMetrics& s) -> std::optional<Value> { return s.input_queue; }},
    {"output_queue_ratio", "gauge",
     "Fill of the task's output channels, 0 to 1 (0 where it has none).",
     [](const SubtaskMetrics& s) -> std::optional<Value> { return s.output_queue; }},
    {"watermark_seconds", "gauge", "The task's current watermark, seconds since the Unix epoch.",
     [](const SubtaskMetrics& s) -> std::optional<Value> {
       if (!s.watermark_ms) return std::nullopt;
       return seconds(*s.watermark_ms);
     }},
    {"watermark_lag_seconds", "gauge", "Wall clock minus the task's watermark, in seconds.",
     [](const SubtaskMetrics& s) -> std::optional<Value> {
       if (!s.watermark_lag_ms) return std::nullopt;
       return seconds(*s.watermark_lag_ms);
     }},
    {"state_entries", "gauge", "Keyed state entries the node subtask holds.",
     [](const SubtaskMetrics& s) -> std::optional<Value> { return s.state_entries; }},
    {"state_bytes", "gauge", "Bytes of keyed state the node subtask holds.",
     [](const SubtaskMetrics& s) -> std::optional<Value> { return s.state_bytes; }},
    {"last_checkpoint_duration_seconds", "gauge",
     "The subtask's part of the last completed checkpoint: barrier received to snapshot written.",
     [](const SubtaskMetrics& s) {
       return checkpoint_figure(s, seconds(s.last_checkpoint.duration_ms));
     }},
    {"last_checkpoint_alignment_seconds", "gauge",
     "The subtask's barrier alignment in the last completed checkpoint: first barrier to last.",
     [](const SubtaskMetrics& s) {
       return checkpoint_figure(s, seconds(s.last_checkpoint.alignment_ms));
     }},
    {"last_checkpoint_bytes", "gauge",
     "Bytes of the subtask's snapshot file in the last completed checkpoint.",
     [](const SubtaskMetrics& s) { return checkpoint_figure(s, s.last_checkpoint.bytes); }},
    {"last_checkpoint_pause_seconds", "gauge",
     "How long the subtask's task held its records to take its state in the last completed checkpoint.",
     [](const SubtaskMetrics& s) { return checkpoint_figure(s, seconds(s.last_checkpoint.pause_ms)); }},
    {"last_checkpoint_stall_seconds", "gauge",
     "With snapshot = \"deferred\": the longest the subtask's task was held after the barrier of the "
     "last completed checkpoint, serialising key groups still frozen for it; 0 otherwise.",
     [](const SubtaskMetrics& s) { return checkpoint_figure(s, seconds(s.last_checkpoint.stall_ms)); }},
    {"last_checkpoint_raw_bytes", "gauge",
     "Bytes of the subtask's snapshot before compression in the last completed checkpoint: what "
     "memory held for it until it was written.",
     [](const SubtaskMetrics& s) { return checkpoint_figure(s, s.last_checkpoint.raw_bytes); }},
    {"last_checkpoint_copied_bytes", "gauge",
     "With snapshot = \"deferred\": bytes of key group tables the subtask's task copied for the last "
     "completed checkpoint (copy on first write), held until the writer serialised them; 0 otherwise.",
     [](const SubtaskMetrics& s) { return checkpoint_figure(s, s.last_checkpoint.copied_bytes); }},
    {"latency_max_seconds", "gauge",
     "Largest source-to-here latency of the latency markers the subtask saw.",
     [](const SubtaskMetrics& s) -> std::optional<Value> {
       if (s.latency.markers == 0) return std::nullopt;
       return s.latency.max_ms / 1000.0;
     }},
};

void append_value(std::string& out, const Value& value) {
  char buf[32];
  if (const auto* u = std::get_if<std::uint64_t>(&value)) {
    out.append(buf, std::to_chars(buf, buf + sizeof buf, *u).ptr);
    return;
  }
  double d = std::get<double>(value);
  if (std::isnan(d)) {
    out += "NaN";
  } else if (std::isinf(d)) {
    out += d > 0 ? "+Inf" : "-Inf";
  } else {
    out.append(buf, std::to_chars(buf, buf + sizeof buf, d).ptr);
  }
}

void append_header(std::string& out, std::string_view name, std::string_view type,
                   std::string_view help) {
  out += "# HELP streamctl_";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE streamctl_";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

// `name="value"`, escaped.
std::string label(std::string_view name, std::string_view value) {
  return std::string(name) + "=\"" + escape_label_value(value) + '"';
}

// `streamctl_NAME{LABELS} VALUE\n`; `labels` is the inside of the braces.
void append_sample(std::string& out, std::string_view name, std::string_view labels,
                   const Value& value) {
  out += "streamctl_";
  out += name;
  out += '{';
  out += labels;
  out += "} ";
  append_value(out, value);
  out += '\n';
}

} // namespace

std::string escape_label_value(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    switch (c) {
    case '\\': out += "\\\\"; break;
    case '"': out += "\\\""; break;
    case '\n': out += "\\n"; break;
    default: out += c;
    }
  }
  return out;
}

std::string render_prometheus_text(const JobMetrics& metrics) {
  const std::string job_labels =
      label("job", metrics.job_id) + "," + label("job_name", metrics.job_name);
  // The label set of every subtask, made once: each appears in every family.
  std::vector<std::string> labels;
  labels.reserve(metrics.subtasks.size());
  for (const auto& s : metrics.subtasks)
    labels.push_back(job_labels + "," + label("node", s.node) + "," +
                     label("subtask", std::to_string(s.subtask)) + "," + label("host", s.host));

  std::string out;
  out.reserve(256 + metrics.subtasks.size() * 2400);
  const std::pair<std::string_view, Value> job_counters[] = {
      {"restarts_total", static_cast<std::uint64_t>(metrics.restarts)},
      {"checkpoints_completed_total", metrics.checkpoints_completed},
      {"checkpoints_failed_total", metrics.checkpoints_failed},
  };
  const std::string_view job_help[] = {
      "Restarts of the job after failures.",
      "Checkpoints of the job that completed, savepoints included.",
      "Checkpoints of the job that failed or timed out.",
  };
  for (std::size_t k = 0; k < std::size(job_counters); ++k) {
    append_header(out, job_counters[k].first, "counter", job_help[k]);
    append_sample(out, job_counters[k].first, job_labels, job_counters[k].second);
  }

  for (const auto& family : kSubtaskFamilies) {
    bool header = false;
    for (std::size_t k = 0; k < metrics.subtasks.size(); ++k) {
      auto value = family.value(metrics.subtasks[k]);
      if (!value) continue;
      if (!header) append_header(out, family.name, family.type, family.help);
      header = true;
      append_sample(out, family.name, labels[k], *value);
    }
  }

  // Latency percentiles: a summary of quantiles only. The workers report percentiles of the
  // markers, not a sum of latencies, so there is no _sum; nor _count, as `markers` need not be
  // a count since the start. (A gauge with a quantile label, promtool refuses.)
  bool header = false;
  for (std::size_t k = 0; k < metrics.subtasks.size(); ++k) {
    const auto& latency = metrics.subtasks[k].latency;
    if (latency.markers == 0) continue;
    if (!header)
      append_header(out, "latency_seconds", "summary",
                    "Source-to-here latency of the latency markers the subtask saw, by quantile.");
    header = true;
    const std::pair<std::string_view, double> quantiles[] = {
        {"0.5", latency.p50_ms}, {"0.95", latency.p95_ms}, {"0.99", latency.p99_ms}};
    for (const auto& [quantile, ms] : quantiles)
      append_sample(out, "latency_seconds",
                    labels[k] + ",quantile=\"" + std::string(quantile) + "\"", ms / 1000.0);
  }
  return out;
}

} // namespace streamctl::runtime
