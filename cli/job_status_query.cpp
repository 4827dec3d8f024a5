#include "cli/job_status_query.hpp"

#include <algorithm>
#include <cctype>
#include <string_view>
#include <vector>

#include "pipeline/runtime/job_client.hpp"
#include "state/batch.hpp"
#include "state/json_reader.hpp"
#include "state/json_writer.hpp"

namespace streamctl::cli {

namespace {

bool is_count(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

// The autoscaler's last decision (autoscaler.hpp) is passed on only as a JSON object.
bool is_json_object(const std::string& s) {
  if (s.empty() || s.front() != '{') return false;
  state::FieldNames names;
  state::Batch batch;
  auto parsed = state::parse_json_value(s, names, batch);
  return parsed && parsed->kind == state::Kind::Map;
}

} // namespace

std::string job_status_json(const runtime::JobEntry& entry) {
  using state::json_string;
  // An ended job shows its operators' last figures (operators.json), when it left them.
  std::string operators = entry.final_operators.empty() ? "[]" : entry.final_operators;
  std::string state = entry.state;
  std::string last_checkpoint = entry.last_checkpoint;
  std::string extra; // the reply's job-wide figures, as they come: `status --json` shows them
  std::vector<std::string> warnings = entry.warnings;
  if (entry.state == "running") {
    auto reply = runtime::ask_job(entry, transport::ControlMessage{"STATUS", {}});
    operators = reply.get("operators");
    state = reply.get("state");
    last_checkpoint = reply.get("last_checkpoint");
    // A reply field is passed on only when it is what its name promises, so that the object
    // stays JSON whatever a coordinator of another version sends.
    for (const char* key : {"restarts", "checkpoints_completed", "checkpoints_failed"})
      if (is_count(reply.get(key))) extra += ",\"" + std::string(key) + "\":" + reply.get(key);
    if (is_json_object(reply.get("autoscale"))) extra += ",\"autoscale\":" + reply.get("autoscale");
    warnings.clear();
    std::string_view lines = reply.get("warnings");
    while (!lines.empty()) {
      std::size_t end = std::min(lines.find('\n'), lines.size());
      if (end > 0) warnings.emplace_back(lines.substr(0, end));
      lines.remove_prefix(std::min(end + 1, lines.size()));
    }
  }
  if (!warnings.empty()) {
    extra += ",\"warnings\":[";
    for (std::size_t k = 0; k < warnings.size(); ++k) extra += (k ? "," : "") + json_string(warnings[k]);
    extra += "]";
  }
  if (entry.failure)
    extra += ",\"failure\":{\"node\":" + json_string(entry.failure->node) + ",\"task\":" +
             json_string(entry.failure->task) + ",\"message\":" + json_string(entry.failure->message) +
             ",\"time\":" + json_string(entry.failure->time) + "}";
  return "{\"id\":" + json_string(entry.id) + ",\"name\":" + json_string(entry.name) +
         ",\"state\":" + json_string(state) + ",\"started\":" + json_string(entry.started) +
         ",\"updated\":" + json_string(entry.updated) +
         ",\"coordinator_pid\":" + std::to_string(entry.coordinator_pid) +
         ",\"last_checkpoint\":" + json_string(last_checkpoint) + extra +
         ",\"operators\":" + (operators.empty() ? "[]" : operators) + "}";
}

} // namespace streamctl::cli
