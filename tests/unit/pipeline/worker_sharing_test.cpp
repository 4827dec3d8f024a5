// Which tasks share a worker process (pipeline/spec/worker_sharing.hpp): those of one subtask
// index on this host, at most one that a rescale may keep, and none that reads stdin or holds a
// port or a child.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "pipeline/runtime/job_loader.hpp"
#include "pipeline/spec/worker_sharing.hpp"
#include "unit/all_node_types.hpp"

using namespace streamctl;

namespace {

// `source` into a keyed window (parallelism from `sets`), then a reduce by another key, then
// `sink`.
runtime::LoadedJob job(const std::vector<std::string>& sets, const std::string& source = "type = \"generator\"",
                       const std::string& sink = "type = \"stdout\"") {
  std::string text = "name = \"s\"\nmax_parallelism = 8\n[sources.gen]\n" + source +
                     "\n[operators.per_key]\ntype = \"window\"\ninputs = [\"gen\"]\nkey = [\"seq\"]\n"
                     "window = { kind = \"tumbling\", size = \"1s\" }\naggregates = { n = \"count()\" }\n"
                     "[operators.running]\ntype = \"reduce\"\ninputs = [\"per_key\"]\nkey = [\"n\"]\n"
                     "aggregates = { c = \"count()\" }\n"
                     "[sinks.out]\ninputs = [\"running\"]\n" + sink + "\n";
  return runtime::load_job_text(text, "s.toml", std::filesystem::current_path(), sets, testing::all_node_types());
}

std::vector<int> all_tasks(const runtime::LoadedJob& j) {
  std::vector<int> ids;
  for (const auto& t : j.plan.tasks) ids.push_back(t.id);
  return ids;
}

// Each process as the sorted names of its tasks' chains' first nodes and subtasks: "gen[0]".
std::vector<std::vector<std::string>> named(const runtime::LoadedJob& j, const std::vector<std::vector<int>>& groups) {
  std::vector<std::vector<std::string>> out;
  for (const auto& g : groups) {
    std::vector<std::string> names;
    for (int id : g) {
      const auto& t = j.plan.tasks[static_cast<std::size_t>(id)];
      const auto& chain = j.plan.chains[static_cast<std::size_t>(t.chain)];
      names.push_back(j.spec.nodes[chain.nodes.front()].name + "[" + std::to_string(t.subtask) + "]");
    }
    std::sort(names.begin(), names.end());
    out.push_back(names);
  }
  return out;
}

using Groups = std::vector<std::vector<std::string>>;

} // namespace

TEST_CASE("tasks of one subtask index share a process with at most one keyed state kept by a rescale",
          "[worker_sharing]") {
  auto j = job({"parallelism=2", "sinks.out.type=\"file\"", "sinks.out.path=\"out\""}, "type = \"generator\"",
               "type = \"file\"\npath = \"out\"");
  auto groups = pipeline::group_tasks_into_workers(j.spec, j.plan, all_tasks(j));
  // The window and the reduce may each be kept by a rescale: never in one process.
  CHECK(named(j, groups) == Groups{{"gen[0]", "per_key[0]"}, {"gen[1]", "per_key[1]"}, {"running[0]"},
                                   {"running[1]"}});
}

TEST_CASE("slot_sharing = false gives every task a process of its own", "[worker_sharing]") {
  auto j = job({"parallelism=2", "slot_sharing=false"});
  auto groups = pipeline::group_tasks_into_workers(j.spec, j.plan, all_tasks(j));
  CHECK(groups.size() == j.plan.tasks.size());
  for (const auto& g : groups) CHECK(g.size() == 1);
}

TEST_CASE("a task that reads stdin or holds a port runs alone", "[worker_sharing]") {
  auto from_stdin = job({"parallelism=2"}, "type = \"stdin\"");
  for (const auto& g : named(from_stdin, pipeline::group_tasks_into_workers(from_stdin.spec, from_stdin.plan,
                                                                            all_tasks(from_stdin))))
    if (std::find(g.begin(), g.end(), "gen[0]") != g.end()) CHECK(g.size() == 1);
  auto to_port = job({"parallelism=2"}, "type = \"generator\"", "type = \"tcp\"\naddress = \"127.0.0.1:9\"");
  auto groups = named(to_port, pipeline::group_tasks_into_workers(to_port.spec, to_port.plan, all_tasks(to_port)));
  bool alone = false;
  for (const auto& g : groups)
    for (const auto& name : g)
      if (name.rfind("running", 0) == 0 && g.size() == 1) alone = true;
  CHECK(alone);
}

TEST_CASE("a task placed on another host runs alone", "[worker_sharing]") {
  auto j = job({"parallelism=2"});
  std::vector<std::string> hosts(j.plan.tasks.size(), "");
  hosts[0] = "h2";
  auto groups = pipeline::group_tasks_into_workers(j.spec, j.plan, all_tasks(j), hosts);
  bool first_alone = false;
  for (const auto& g : groups)
    if (g == std::vector<int>{0}) first_alone = true;
  CHECK(first_alone);
  std::size_t tasks = 0;
  for (const auto& g : groups) tasks += g.size();
  CHECK(tasks == j.plan.tasks.size());
}

TEST_CASE("only the tasks given are grouped and each once", "[worker_sharing]") {
  auto j = job({"parallelism=2"});
  std::vector<int> some{1, 3};
  auto groups = pipeline::group_tasks_into_workers(j.spec, j.plan, some);
  std::vector<int> seen;
  for (const auto& g : groups) seen.insert(seen.end(), g.begin(), g.end());
  std::sort(seen.begin(), seen.end());
  CHECK(seen == some);
}
