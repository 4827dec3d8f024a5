#include "pipeline/runtime/job_status.hpp"

#include <algorithm>
#include <cstdio>

#include "pipeline/runtime/job_metrics.hpp"
#include "state/json_writer.hpp"

namespace streamctl::runtime {

namespace {

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", v);
  // "12.000" -> "12", "0.250" -> "0.25": short, and still JSON numbers.
  std::string out = text;
  while (!out.empty() && out.back() == '0') out.pop_back();
  if (!out.empty() && out.back() == '.') out.pop_back();
  return out.empty() || out == "-" ? "0" : out;
}

void append_subtask(const SubtaskMetrics& m, std::string& out) {
  out += "{\"index\":" + std::to_string(m.subtask) + ",\"host\":";
  state::append_json_string(m.host, out);
  out += ",\"pid\":" + std::to_string(m.pid) + ",\"records_in\":" + std::to_string(m.records_in) +
         ",\"records_out\":" + std::to_string(m.records_out) + ",\"bad_records\":" + std::to_string(m.bad_records) +
         ",\"bytes_in\":" + std::to_string(m.bytes_in) + ",\"bytes_out\":" + std::to_string(m.bytes_out) +
         ",\"records_in_per_s\":" + number(m.records_in_per_s) +
         ",\"records_out_per_s\":" + number(m.records_out_per_s) +
         ",\"records_in_per_s_1m\":" + number(m.records_in_per_s_1m) +
         ",\"records_out_per_s_1m\":" + number(m.records_out_per_s_1m) + ",\"busy\":" + number(m.busy) +
         ",\"idle\":" + number(m.idle) + ",\"backpressured\":" + number(m.backpressured) +
         ",\"input_queue\":" + number(m.input_queue) + ",\"output_queue\":" + number(m.output_queue);
  if (m.watermark_ms) out += ",\"watermark_ms\":" + std::to_string(*m.watermark_ms);
  if (m.watermark_lag_ms) out += ",\"watermark_lag_ms\":" + std::to_string(*m.watermark_lag_ms);
  out += ",\"state_entries\":" + std::to_string(m.state_entries) + ",\"state_bytes\":" + std::to_string(m.state_bytes);
  const CheckpointFigures& c = m.last_checkpoint;
  out += ",\"last_checkpoint\":{\"id\":" + std::to_string(c.id) + ",\"duration_ms\":" + std::to_string(c.duration_ms) +
         ",\"alignment_ms\":" + std::to_string(c.alignment_ms) + ",\"bytes\":" + std::to_string(c.bytes) +
         ",\"pause_ms\":" + std::to_string(c.pause_ms) + ",\"stall_ms\":" + std::to_string(c.stall_ms) +
         ",\"raw_bytes\":" + std::to_string(c.raw_bytes) + ",\"copied_bytes\":" + std::to_string(c.copied_bytes) +
         "}";
  if (m.latency.markers > 0)
    out += ",\"latency_ms\":{\"markers\":" + std::to_string(m.latency.markers) + ",\"p50\":" + number(m.latency.p50_ms) +
           ",\"p95\":" + number(m.latency.p95_ms) + ",\"p99\":" + number(m.latency.p99_ms) +
           ",\"max\":" + number(m.latency.max_ms) + "}";
  out += "}";
}

} // namespace

std::string status_json(const LoadedJob& job, const JobMetrics& metrics) {
  std::string out = "[";
  for (std::size_t n = 0; n < job.spec.nodes.size(); ++n) {
    const pipeline::NodeSpec& node = job.spec.nodes[n];
    if (n) out += ",";
    out += "{\"name\":";
    state::append_json_string(node.name, out);
    out += ",\"type\":";
    state::append_json_string(node.type, out);
    out += ",\"parallelism\":" + std::to_string(job.spec.parallelism_of(node)) + ",\"subtasks\":[";
    bool first = true;
    for (const auto& m : metrics.subtasks) {
      if (m.node != node.name) continue;
      out += first ? "" : ",";
      first = false;
      append_subtask(m, out);
    }
    out += "]}";
  }
  return out + "]";
}

std::string describe_totals(const pipeline::PipelineSpec& spec,
                            const std::vector<std::vector<NodeMetrics>>& per_task, double seconds) {
  JobTotals totals = sum_metrics(spec, per_task);
  char rate[32];
  std::snprintf(rate, sizeof rate, "%.0f",
                seconds > 0 ? static_cast<double>(totals.read) / seconds : 0.0);
  return std::to_string(totals.read) + " records read, " + std::to_string(totals.written) +
         " written, " + std::to_string(totals.bad) + " bad, " +
         (totals.has_shed ? std::to_string(totals.shed) + " shed, " : std::string()) + rate +
         " records/s read";
}

std::vector<std::string> describe_shedding(const pipeline::PipelineSpec& spec,
                                           const std::vector<std::vector<NodeMetrics>>& per_task) {
  std::vector<std::string> lines;
  for (const auto& node : spec.nodes) {
    if (node.type != "shed") continue;
    std::uint64_t in = 0, out = 0;
    for (const auto& task : per_task)
      for (const auto& m : task)
        if (m.node == node.name) {
          in += m.records_in;
          out += m.records_out;
        }
    if (in <= out) continue;
    char share[32];
    std::snprintf(share, sizeof share, "%.1f%%", 100.0 * static_cast<double>(in - out) / static_cast<double>(in));
    lines.push_back("shed node '" + node.name + "' dropped " + std::to_string(in - out) + " of " +
                    std::to_string(in) + " records (" + share + ")");
  }
  return lines;
}

std::vector<std::string> describe_silent_drops(const pipeline::PipelineSpec& spec,
                                               const std::vector<std::vector<NodeMetrics>>& per_task,
                                               std::uint64_t min_records) {
  std::vector<std::string> lines;
  for (const auto& node : spec.nodes) {
    if (node.type != "filter" && node.type != "flat_map" && node.type != "join") continue;
    std::uint64_t in = 0, out = 0, bad = 0;
    for (const auto& task : per_task)
      for (const auto& m : task)
        if (m.node == node.name) {
          in += m.records_in;
          out += m.records_out;
          bad += m.bad_records;
        }
    if (in == 0 || in < min_records || out != 0) continue;
    // The node's table: a copied spec (the coordinator's) keeps no positions of its values.
    lines.push_back(pipeline::position_of(spec, node, "") + ": " + node.type + " '" +
                    node.name + "' passed on none of the " + std::to_string(in) +
                    " records it read" +
                    (bad > 0 ? " (" + std::to_string(bad) + " of them bad records)" : std::string()));
  }
  return lines;
}

std::string describe_parallelism(const pipeline::PipelineSpec& spec) {
  std::string out;
  for (const auto& node : spec.nodes)
    out += (out.empty() ? "" : ", ") + node.name + "=" + std::to_string(spec.parallelism_of(node));
  return out;
}

} // namespace streamctl::runtime
