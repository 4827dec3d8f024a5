// Which workers a rescale keeps (pipeline/runtime/worker_reuse.hpp): those whose chains share a
// node with keyed state kept in memory, paired by the most key groups in common.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "pipeline/runtime/worker_reuse.hpp"
#include "unit/all_node_types.hpp"

using namespace streamctl;

namespace {

// A generator into a keyed window and a map, written to stdout; `source` replaces the
// generator's table.
runtime::LoadedJob job(const std::vector<std::string>& sets,
                       const std::string& source = "type = \"generator\"\ncount = 10") {
  std::string text = "name = \"r\"\nmax_parallelism = 12\n[sources.gen]\n" + source +
                     "\n[operators.per_key]\ntype = \"window\"\ninputs = [\"gen\"]\nkey = [\"seq\"]\n"
                     "window = { kind = \"tumbling\", size = \"1s\" }\naggregates = { n = \"count()\" }\n"
                     "[operators.tidy]\ntype = \"map\"\ninputs = [\"per_key\"]\nset = { x = \"1\" }\n"
                     "[sinks.out]\ntype = \"stdout\"\ninputs = [\"tidy\"]\n";
  return runtime::load_job_text(text, "r.toml", std::filesystem::current_path(), sets, testing::all_node_types());
}

// The task of `job` whose chain holds `node`, subtask `subtask`.
int task_of(const runtime::LoadedJob& job, const std::string& node, int subtask) {
  for (const auto& t : job.plan.tasks) {
    const auto& chain = job.plan.chains[static_cast<std::size_t>(t.chain)];
    for (std::size_t index : chain.nodes)
      if (job.spec.nodes[index].name == node && t.subtask == subtask) return t.id;
  }
  FAIL("no task of " << node << "[" << subtask << "]");
  return -1;
}

} // namespace

TEST_CASE("a rescale 1 -> 2 keeps the window's worker for the subtask of half its groups", "[worker_reuse]") {
  auto before = job({"parallelism=1"});
  auto after = job({"parallelism=2"});
  auto reuse = runtime::plan_worker_reuse(before, after);
  REQUIRE(reuse.size() == 1);
  CHECK(reuse[0].old_task == task_of(before, "per_key", 0));
  CHECK(reuse[0].new_task == task_of(after, "per_key", 0));
  CHECK(reuse[0].key_groups == 6);
}

TEST_CASE("a rescale 3 -> 2 keeps two of three workers, each for the subtask it overlaps most", "[worker_reuse]") {
  auto before = job({"parallelism=3"}); // groups [0,4) [4,8) [8,12)
  auto after = job({"parallelism=2"});  // groups [0,6) [6,12)
  auto reuse = runtime::plan_worker_reuse(before, after);
  REQUIRE(reuse.size() == 2);
  std::sort(reuse.begin(), reuse.end(), [](auto& a, auto& b) { return a.new_task < b.new_task; });
  CHECK(reuse[0].old_task == task_of(before, "per_key", 0));
  CHECK(reuse[0].new_task == task_of(after, "per_key", 0));
  CHECK(reuse[0].key_groups == 4);
  CHECK(reuse[1].old_task == task_of(before, "per_key", 2));
  CHECK(reuse[1].new_task == task_of(after, "per_key", 1));
  CHECK(reuse[1].key_groups == 4);
}

TEST_CASE("no worker is kept without keyed state, nor for or from a task that reads stdin", "[worker_reuse]") {
  // The generator's chain and the sink's at 1 -> 2: only the window's worker.
  auto reuse = runtime::plan_worker_reuse(job({"parallelism=2"}), job({"parallelism=4"}));
  CHECK(reuse.size() == 2);
  // At parallelism 1 stdin, the window, the map and the sink are one chain: it reads stdin.
  auto from_stdin = runtime::plan_worker_reuse(job({"parallelism=1"}, "type = \"stdin\""),
                                               job({"operators.per_key.parallelism=2"}, "type = \"stdin\""));
  CHECK(from_stdin.empty());
  // A tcp source fused with the window would still listen on its port in the kept process.
  const std::string tcp = "type = \"tcp\"\naddress = \"127.0.0.1:9\"";
  CHECK(runtime::plan_worker_reuse(job({"parallelism=1"}, tcp), job({"operators.per_key.parallelism=2"}, tcp)).empty());
}

TEST_CASE("a worker is kept for a rescale of another node, whose groups all stay", "[worker_reuse]") {
  auto before = job({"parallelism=2"});
  auto after = job({"parallelism=2", "operators.tidy.parallelism=3"});
  auto reuse = runtime::plan_worker_reuse(before, after);
  REQUIRE(reuse.size() == 2);
  for (const auto& r : reuse) CHECK(r.key_groups == 6);
}
