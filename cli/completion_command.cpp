// `streamctl completion bash|zsh|fish`: prints a completion script written from the commands
// registered on the app (cli/completion_script.hpp). The scripts call the hidden
// `--list-jobs`, `--list-nodes FILE` and `--list-job-nodes JOB` for candidates that depend on
// the machine; those print one word a line, and nothing at all on any error: a <Tab> must
// never print a message into the user's command line.

#include <CLI/CLI.hpp>
#include <algorithm>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/completion_script.hpp"
#include "cli/context.hpp"
#include "cli/value_checks.hpp"
#include "pipeline/runtime/job_directory.hpp"
#include "pipeline/runtime/job_loader.hpp"
#include "pipeline/runtime/job_registry.hpp"
#include "pipeline/spec/config_loader.hpp"
#include "state/error.hpp"

namespace streamctl::cli {

namespace {

void print_nodes(const pipeline::LoadResult& loaded) {
  if (!loaded.spec) return;
  for (const auto& node : loaded.spec->nodes)
    std::cout << node.name << "\n";
}

// Node names of a pipeline file, when it loads without errors.
void list_nodes(const Context& ctx, const std::string& file) {
  // "-" is the pipeline on stdin: completion must not wait on the terminal for it.
  if (file == pipeline::kStdinPipeline) return;
  print_nodes(pipeline::load_pipeline(file, {}, runtime::catalog_of(ctx.registry)));
}

// Node names of a registered job: the pipeline kept in its directory, with its overrides.
void list_job_nodes(const Context& ctx, const std::string& job) {
  runtime::JobEntry entry = runtime::find_job(ctx.state_dir(), job);
  auto stored = runtime::read_stored_pipeline(entry.dir);
  if (!stored.found) return;
  std::filesystem::path base_dir = entry.base_dir.empty() ? entry.dir : entry.base_dir;
  print_nodes(pipeline::load_pipeline_text(stored.text, entry.id, base_dir, stored.overrides,
                                           runtime::catalog_of(ctx.registry), stored.variables));
}

// Ids first, then the names (each once): both name a job.
void list_jobs(const Context& ctx) {
  auto jobs = runtime::list_jobs(ctx.state_dir());
  std::vector<std::string> names;
  for (const auto& j : jobs) {
    std::cout << j.id << "\n";
    if (!j.name.empty() && std::find(names.begin(), names.end(), j.name) == names.end())
      names.push_back(j.name);
  }
  for (const auto& n : names)
    std::cout << n << "\n";
}

} // namespace

void add_completion_command(CLI::App& app, Context& ctx) {
  auto* cmd =
      app.add_subcommand("completion", "Print a shell completion script for bash, zsh or fish");
  auto shell = std::make_shared<std::string>();
  auto list_jobs_flag = std::make_shared<bool>(false);
  auto nodes_file = std::make_shared<std::string>();
  auto nodes_job = std::make_shared<std::string>();
  cmd->add_option("SHELL", *shell, "bash, zsh or fish")
      ->type_name("")
      ->check(one_of({"bash", "zsh", "fish"}));
  // Hidden (empty group): called by the scripts, not by people.
  cmd->add_flag("--list-jobs", *list_jobs_flag, "print the job ids and names")->group("");
  cmd->add_option("--list-nodes", *nodes_file, "print the node names of a pipeline file")
      ->group("");
  cmd->add_option("--list-job-nodes", *nodes_job, "print the node names of a job")->group("");
  cmd->callback([&app, &ctx, shell, list_jobs_flag, nodes_file, nodes_job] {
    ctx.exit_code = 0;
    bool listing = *list_jobs_flag || !nodes_file->empty() || !nodes_job->empty();
    if (listing) {
      try {
        if (*list_jobs_flag) list_jobs(ctx);
        if (!nodes_file->empty()) list_nodes(ctx, *nodes_file);
        if (!nodes_job->empty()) list_job_nodes(ctx, *nodes_job);
      } catch (const std::exception&) {
        // Silent on purpose (see the top of this file); an unknown job simply has no nodes.
      }
      return;
    }
    if (shell->empty()) throw Error(ErrorKind::Usage, "completion: which shell? bash, zsh or fish");
    auto model = completion_model(app);
    if (*shell == "bash")
      std::cout << bash_completion_script(model);
    else if (*shell == "zsh")
      std::cout << zsh_completion_script(model);
    else
      std::cout << fish_completion_script(model);
  });
}

} // namespace streamctl::cli
