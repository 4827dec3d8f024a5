#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <utility>

#include "cli/context.hpp"
#include "pipeline/runtime/job_directory.hpp"
#include "state/json_writer.hpp"

namespace streamctl::cli {

namespace {

using state::json_string;

// Without --all, list shows the running jobs and this many of the others, the newest: a
// state dir fills with ended jobs (streamctl prune removes them) and the table should not.
constexpr std::size_t kEndedShown = 20;

bool is_running(const runtime::JobEntry& j) { return j.state == "running" || j.state == "restarting"; }

struct ListFilter {
  bool running = false;
  bool all = false;
  std::string name;
};

// The jobs to show, oldest first as list_jobs gives them, and how many ended ones were left out.
std::pair<std::vector<runtime::JobEntry>, std::size_t> select_jobs(std::vector<runtime::JobEntry> jobs,
                                                                    const ListFilter& filter) {
  std::erase_if(jobs, [&](const runtime::JobEntry& j) {
    return (!filter.name.empty() && j.name != filter.name) || (filter.running && !is_running(j));
  });
  if (filter.all || filter.running || !filter.name.empty()) return {std::move(jobs), 0};
  std::size_t ended = static_cast<std::size_t>(std::count_if(jobs.begin(), jobs.end(), [](const auto& j) { return !is_running(j); }));
  const std::size_t hidden = ended > kEndedShown ? ended - kEndedShown : 0;
  std::size_t skipped = 0;
  std::erase_if(jobs, [&](const runtime::JobEntry& j) { return !is_running(j) && skipped++ < hidden; });
  return {std::move(jobs), hidden};
}

} // namespace

void add_list_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand(
      "list", "List the jobs registered in the state dir, oldest first: the running ones and the " +
                  std::to_string(kEndedShown) + " newest others (--all for every one)");
  auto json = std::make_shared<bool>(false);
  auto filter = std::make_shared<ListFilter>();
  auto* running = cmd->add_flag("--running", filter->running, "only the running (and restarting) jobs");
  cmd->add_flag("--all", filter->all, "every job, however old (by default only the " + std::to_string(kEndedShown) +
                                          " newest ended jobs are shown)")
      ->excludes(running);
  cmd->add_option("--name", filter->name, "only the jobs of that name, all of them")->type_name("NAME");
  cmd->add_flag("--json", *json,
                "one JSON object a line: id, name, state, started, updated, tasks, last_checkpoint");
  cmd->callback([&ctx, json, filter] {
    ctx.configure_logging("streamctl");
    auto [jobs, hidden] = select_jobs(runtime::list_jobs(ctx.state_dir()), *filter);
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
    // On stderr: stdout stays the table (or JSON lines) a script reads.
    if (hidden > 0 && !ctx.global.quiet)
      std::cerr << "(" << hidden << " older job" << (hidden == 1 ? "" : "s") << " not shown; list --all)\n";
    ctx.exit_code = 0;
  });
}

} // namespace streamctl::cli
