#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/context.hpp"
#include "pipeline/runtime/job_client.hpp"
#include "pipeline/runtime/job_directory.hpp"
#include "state/batch.hpp"
#include "state/json_reader.hpp"
#include "state/json_writer.hpp"

namespace streamctl::cli {

namespace {

using state::json_string;

// The operators' table of a running job, one line a subtask, from the STATUS reply's JSON.
void print_operators(const std::string& operators_json) {
  state::FieldNames names;
  state::Batch batch;
  auto parsed = state::parse_json_value(operators_json, names, batch);
  if (!parsed || parsed->kind != state::Kind::Array) return;
  auto field = [&](const state::Value& map, const char* name) -> state::Value {
    state::FieldId id = names.intern(name);
    for (std::uint32_t k = 0; map.kind == state::Kind::Map && k < map.size; ++k)
      if (map.map[k].name == id) return map.map[k].value;
    return state::Value::null();
  };
  auto text = [](const state::Value& v) {
    if (v.kind == state::Kind::String) return std::string(v.s, v.size);
    if (v.kind == state::Kind::Int) return std::to_string(v.i);
    return std::string("-");
  };
  for (std::uint32_t n = 0; n < parsed->size; ++n) {
    const state::Value& op = parsed->array[n];
    std::cout << "  " << text(field(op, "name")) << " (" << text(field(op, "type")) << ") x"
              << text(field(op, "parallelism")) << "\n";
    state::Value subtasks = field(op, "subtasks");
    for (std::uint32_t k = 0; subtasks.kind == state::Kind::Array && k < subtasks.size; ++k) {
      const state::Value& s = subtasks.array[k];
      std::cout << "    [" << text(field(s, "index")) << "] pid " << text(field(s, "pid")) << " on "
                << text(field(s, "host")) << ": " << text(field(s, "records_in")) << " in, "
                << text(field(s, "records_out")) << " out, " << text(field(s, "bad_records")) << " bad\n";
    }
  }
}

} // namespace

void add_status_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("status", "Show a job's state and, while it runs, each operator subtask");
  auto job = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  cmd->add_option("JOB", *job, "a job id, or a job name that one job has")->required();
  cmd->add_flag("--json", *json, "print one JSON object: id, name, state, started, last_checkpoint, operators");
  cmd->callback([&ctx, job, json] {
    ctx.configure_logging("streamctl");
    runtime::JobEntry entry = runtime::find_job(ctx.state_dir(), *job);
    // An ended job shows its operators' last figures (operators.json), if it left them.
    std::string operators = entry.final_operators.empty() ? "[]" : entry.final_operators;
    std::string state = entry.state;
    std::string last_checkpoint = entry.last_checkpoint;
    std::string job_figures; // of a running job: restarts and checkpoint counts
    if (entry.state == "running") {
      auto reply = runtime::ask_job(entry, transport::ControlMessage{"STATUS", {}});
      operators = reply.get("operators");
      state = reply.get("state");
      last_checkpoint = reply.get("last_checkpoint");
      for (const char* key : {"restarts", "checkpoints_completed", "checkpoints_failed"})
        job_figures += std::string(",\"") + key + "\":" + std::to_string(reply.get_int(key, 0));
    }
    std::string failure;
    if (entry.failure)
      failure = ",\"failure\":{\"node\":" + json_string(entry.failure->node) + ",\"task\":" +
                json_string(entry.failure->task) + ",\"message\":" + json_string(entry.failure->message) +
                ",\"time\":" + json_string(entry.failure->time) + "}";
    if (*json) {
      std::cout << "{\"id\":" << json_string(entry.id) << ",\"name\":" << json_string(entry.name)
                << ",\"state\":" << json_string(state) << ",\"started\":" << json_string(entry.started)
                << ",\"updated\":" << json_string(entry.updated) << ",\"coordinator_pid\":" << entry.coordinator_pid
                << ",\"last_checkpoint\":" << json_string(last_checkpoint) << job_figures << failure
                << ",\"operators\":" << operators << "}\n";
    } else {
      std::cout << "job " << entry.id << " (" << entry.name << "): " << state
                << (entry.lost ? " (its coordinator is gone)" : "") << ", started " << entry.started << "\n";
      std::cout << "  last checkpoint: " << (last_checkpoint.empty() ? "none" : last_checkpoint) << "\n";
      if (entry.state == "running") print_operators(operators);
      else
        for (const auto& t : entry.tasks) {
          // A worker that has exited shows no pid: the number may name another process now.
          if (runtime::process_alive(t.pid)) std::cout << "  " << t.task << ": pid " << t.pid << " on " << t.host << "\n";
          else std::cout << "  " << t.task << ": exited\n";
        }
    }
    ctx.exit_code = 0;
  });
}

} // namespace streamctl::cli
