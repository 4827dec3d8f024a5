#include <catch2/catch.hpp>

#include "operators/registry.hpp"
#include "pipeline/runtime/job_loader.hpp"

using namespace streamctl;

namespace {
runtime::LoadedJob load(const std::string& text) {
  operators::Registry registry;
  operators::register_builtin_types(registry);
  return runtime::load_job_text(text, "plan.toml", std::filesystem::current_path(), {}, registry);
}

const char* kLinear = R"(name = "p"
parallelism = 2
[sources.g]
type = "generator"
[operators.a]
type = "filter"
inputs = ["g"]
where = "true"
[operators.b]
type = "map"
inputs = ["a"]
set = { x = "1" }
[sinks.out]
type = "stdout"
inputs = ["b"]
)";
} // namespace

TEST_CASE("forward edges of equal parallelism fuse into one chain", "[plan]") {
  auto job = load(kLinear);
  REQUIRE(job.plan.chains.size() == 2); // stdout is always parallelism 1
  CHECK(pipeline::chain_label(job.spec, job.plan.chains[0]) == "g -> a -> b");
  CHECK(job.plan.chains[0].parallelism == 2);
  CHECK(pipeline::chain_label(job.spec, job.plan.chains[1]) == "out");
  REQUIRE(job.plan.edges.size() == 1);
  CHECK(job.plan.edges[0].partition == pipeline::Partition::Rebalance);
  CHECK(job.plan.tasks.size() == 3);
  CHECK(job.plan.input_channel_count(1, 0) == 2);
}

TEST_CASE("a node with two consumers ends its chain; forward edges connect equal subtasks", "[plan]") {
  auto job = load(R"(name = "p"
parallelism = 3
[sources.g]
type = "generator"
[operators.a]
type = "filter"
inputs = ["g"]
where = "true"
[operators.b]
type = "filter"
inputs = ["g"]
where = "true"
[sinks.out]
type = "file"
inputs = ["a", "b"]
path = "/tmp/streamctl-plan-test"
)");
  REQUIRE(job.plan.chains.size() == 4);
  for (const auto& e : job.plan.edges) {
    CHECK(e.partition == pipeline::Partition::Forward);
    CHECK(e.connects(1, 1));
    CHECK_FALSE(e.connects(1, 2));
  }
  // The sink's subtask 0 hears from a[0] and b[0] only.
  int sink_chain = job.plan.chains.back().id;
  CHECK(job.plan.input_channel_count(sink_chain, 0) == 2);
}

TEST_CASE("partition overrides the default edge", "[plan]") {
  auto job = load(R"(name = "p"
[sources.g]
type = "generator"
[operators.a]
type = "filter"
inputs = ["g"]
where = "true"
partition = "broadcast"
parallelism = 1
[sinks.out]
type = "stdout"
inputs = ["a"]
)");
  REQUIRE(job.plan.edges.size() == 1);
  CHECK(job.plan.edges[0].partition == pipeline::Partition::Broadcast);
  CHECK(pipeline::chain_label(job.spec, job.plan.chains[1]) == "a -> out");
}
