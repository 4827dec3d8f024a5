#include "pipeline/runtime/job_status.hpp"

#include <algorithm>
#include <cstdio>

#include "pipeline/runtime/job_metrics.hpp"
#include "state/json_writer.hpp"

namespace streamctl::runtime {

std::string status_json(const LoadedJob& job, const WorkerPool& workers) {
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
    for (const auto& t : workers.tasks()) {
      const auto& chain = job.plan.chains[static_cast<std::size_t>(t.task->chain)];
      if (std::find(chain.nodes.begin(), chain.nodes.end(), n) == chain.nodes.end()) continue;
      NodeMetrics m{node.name};
      for (const auto& reported : t.metrics)
        if (reported.node == node.name) m = reported;
      out += first ? "" : ",";
      first = false;
      out += "{\"index\":" + std::to_string(t.task->subtask) + ",\"host\":";
      state::append_json_string(t.host.empty() ? "localhost" : t.host, out);
      // On another host the local child is the worker's ssh: show the worker's own pid there.
      int pid = t.host.empty() || t.worker_pid == 0 ? t.process->pid() : t.worker_pid;
      out += ",\"pid\":" + std::to_string(pid) +
             ",\"records_in\":" + std::to_string(m.records_in) +
             ",\"records_out\":" + std::to_string(m.records_out) +
             ",\"bad_records\":" + std::to_string(m.bad_records) + "}";
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
                                               const std::vector<std::vector<NodeMetrics>>& per_task) {
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
    if (in == 0 || out != 0) continue;
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
