#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/context.hpp"
#include "pipeline/runtime/job_directory.hpp"
#include "state/json_writer.hpp"

namespace streamctl::cli {

namespace {

using state::json_string;

} // namespace

void add_list_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("list", "List the jobs registered in the state dir, oldest first");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json,
                "one JSON object a line: id, name, state, started, updated, tasks, last_checkpoint");
  cmd->callback([&ctx, json] {
    ctx.configure_logging("streamctl");
    auto jobs = runtime::list_jobs(ctx.state_dir());
    if (*json) {
      for (const auto& j : jobs)
        std::cout << "{\"id\":" << json_string(j.id) << ",\"name\":" << json_string(j.name)
                  << ",\"state\":" << json_string(j.state) << ",\"started\":" << json_string(j.started)
                  << ",\"updated\":" << json_string(j.updated) << ",\"tasks\":" << j.tasks.size()
                  << ",\"last_checkpoint\":" << json_string(j.last_checkpoint) << "}\n";
    } else if (!jobs.empty()) {
      std::size_t id_width = 2, name_width = 4;
      for (const auto& j : jobs) {
        id_width = std::max(id_width, j.id.size());
        name_width = std::max(name_width, j.name.size());
      }
      auto pad = [](const std::string& s, std::size_t w) { return s + std::string(w - s.size() + 2, ' '); };
      std::cout << pad("ID", id_width) << pad("NAME", name_width) << pad("STATE", 9) << pad("STARTED", 20)
                << pad("TASKS", 5) << "LAST CHECKPOINT\n";
      for (const auto& j : jobs)
        std::cout << pad(j.id, id_width) << pad(j.name, name_width) << pad(j.state, 9) << pad(j.started, 20)
                  << pad(std::to_string(j.tasks.size()), 5)
                  << (j.last_checkpoint.empty() ? "-" : std::filesystem::path(j.last_checkpoint).filename().string())
                  << (j.lost ? "  (coordinator gone)" : "") << "\n";
    }
    ctx.exit_code = 0;
  });
}

} // namespace streamctl::cli
