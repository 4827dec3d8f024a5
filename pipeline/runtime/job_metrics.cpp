#include "pipeline/runtime/job_metrics.hpp"

#include <charconv>

namespace streamctl::runtime {

std::string encode_metrics(const std::vector<NodeMetrics>& metrics) {
  std::string out;
  for (const auto& m : metrics) {
    if (!out.empty()) out += ';';
    out += m.node + ":" + std::to_string(m.records_in) + ":" + std::to_string(m.records_out) + ":" +
           std::to_string(m.bad_records) + ":" + std::to_string(m.state_entries) + ":" +
           std::to_string(m.state_bytes);
  }
  return out;
}

namespace {
bool next_field(std::string_view& text, std::string_view& field) {
  if (text.empty()) return false;
  auto colon = text.find(':');
  field = text.substr(0, colon);
  text.remove_prefix(colon == std::string_view::npos ? text.size() : colon + 1);
  return true;
}

bool parse_count(std::string_view text, std::uint64_t& out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}
} // namespace

std::vector<NodeMetrics> decode_metrics(std::string_view text) {
  std::vector<NodeMetrics> out;
  while (!text.empty()) {
    auto semicolon = text.find(';');
    std::string_view entry = text.substr(0, semicolon);
    text.remove_prefix(semicolon == std::string_view::npos ? text.size() : semicolon + 1);
    std::string_view node, in, records_out, bad;
    NodeMetrics m;
    if (next_field(entry, node) && next_field(entry, in) && next_field(entry, records_out) &&
        next_field(entry, bad) && parse_count(in, m.records_in) && parse_count(records_out, m.records_out) &&
        parse_count(bad, m.bad_records)) {
      // The state figures came later (issue 10): an entry may end after `bad`.
      std::string_view entries, bytes;
      if (next_field(entry, entries) && next_field(entry, bytes) &&
          !(parse_count(entries, m.state_entries) && parse_count(bytes, m.state_bytes)))
        continue;
      m.node = std::string(node);
      out.push_back(std::move(m));
    }
  }
  return out;
}

std::string encode_latency(const std::vector<NodeLatency>& latency) {
  std::string out;
  auto us = [](double ms) { return std::to_string(static_cast<std::int64_t>(ms * 1000.0 + 0.5)); };
  for (const auto& [node, f] : latency) {
    if (!out.empty()) out += ';';
    out += node + ":" + std::to_string(f.markers) + ":" + us(f.p50_ms) + ":" + us(f.p95_ms) + ":" +
           us(f.p99_ms) + ":" + us(f.max_ms);
  }
  return out;
}

std::vector<NodeLatency> decode_latency(std::string_view text) {
  std::vector<NodeLatency> out;
  while (!text.empty()) {
    auto semicolon = text.find(';');
    std::string_view entry = text.substr(0, semicolon);
    text.remove_prefix(semicolon == std::string_view::npos ? text.size() : semicolon + 1);
    std::string_view node, field;
    if (!next_field(entry, node) || node.empty()) continue;
    std::uint64_t values[5];
    bool ok = true;
    for (auto& v : values) ok = ok && next_field(entry, field) && parse_count(field, v);
    if (!ok || !entry.empty()) continue;
    LatencyFigures f;
    f.markers = values[0];
    f.p50_ms = static_cast<double>(values[1]) / 1000.0;
    f.p95_ms = static_cast<double>(values[2]) / 1000.0;
    f.p99_ms = static_cast<double>(values[3]) / 1000.0;
    f.max_ms = static_cast<double>(values[4]) / 1000.0;
    out.emplace_back(std::string(node), f);
  }
  return out;
}

JobTotals sum_metrics(const pipeline::PipelineSpec& spec, const std::vector<std::vector<NodeMetrics>>& per_task) {
  JobTotals totals;
  for (const auto& task : per_task)
    for (const auto& m : task) {
      const pipeline::NodeSpec* node = spec.find(m.node);
      if (node == nullptr) continue;
      if (node->role == pipeline::NodeRole::Source) totals.read += m.records_out;
      if (node->role == pipeline::NodeRole::Sink) totals.written += m.records_in;
      totals.bad += m.bad_records;
      if (node->type == "shed") {
        totals.has_shed = true;
        if (m.records_in > m.records_out) totals.shed += m.records_in - m.records_out;
      }
    }
  return totals;
}

void TaskLoad::write_to(transport::ControlMessage& m) const {
  m.set("busy_ms", std::to_string(busy_ms))
      .set("idle_ms", std::to_string(idle_ms))
      .set("backpressured_ms", std::to_string(backpressured_ms))
      .set("bytes_in", std::to_string(bytes_in))
      .set("bytes_out", std::to_string(bytes_out))
      .set("input_waiting", std::to_string(input_waiting))
      .set("input_polls", std::to_string(input_polls))
      .set("output_full", std::to_string(output_full))
      .set("output_sends", std::to_string(output_sends));
  if (watermark) m.set("watermark", std::to_string(*watermark));
}

TaskLoad TaskLoad::read_from(const transport::ControlMessage& m) {
  auto count = [&](const char* key) {
    auto v = m.get_int(key, 0);
    return v > 0 ? static_cast<std::uint64_t>(v) : 0;
  };
  TaskLoad load;
  load.busy_ms = count("busy_ms");
  load.idle_ms = count("idle_ms");
  load.backpressured_ms = count("backpressured_ms");
  load.bytes_in = count("bytes_in");
  load.bytes_out = count("bytes_out");
  load.input_waiting = count("input_waiting");
  load.input_polls = count("input_polls");
  load.output_full = count("output_full");
  load.output_sends = count("output_sends");
  if (!m.get("watermark").empty()) load.watermark = m.get_int("watermark", 0);
  return load;
}

} // namespace streamctl::runtime
