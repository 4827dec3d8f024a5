// Regression tests for issue 7, finding 5: a parallelism of 32768, or 20,001 nodes that do not
// fuse, validated and forked that many workers until the OOM killer came. The limit check
// names the limit, the flag that raises it, and the place in the file that causes it.
#include <catch2/catch.hpp>

#include "operators/registry.hpp"
#include "pipeline/runtime/job_loader.hpp"
#include "pipeline/spec/worker_limits.hpp"

using namespace streamctl;

namespace {

runtime::LoadedJob load(const std::string& text, std::vector<std::string> overrides = {}) {
  operators::Registry registry;
  operators::register_builtin_types(registry);
  return runtime::load_job_text(text, "w.toml", std::filesystem::current_path(), overrides,
                                registry);
}

pipeline::WorkerLimits limits(std::size_t per_job, std::size_t per_host,
                              std::size_t elsewhere = 0) {
  pipeline::WorkerLimits l;
  l.per_job = per_job;
  l.per_host = per_host;
  l.per_host_origin = "test";
  l.running_elsewhere = elsewhere;
  return l;
}

const char* kWide = R"(name = "w"
max_parallelism = 32768
parallelism = 32768
[sources.g]
type = "generator"
[operators.a]
type = "filter"
inputs = ["g"]
where = "true"
parallelism = 2
[sinks.out]
type = "stdout"
inputs = ["a"]
)";

} // namespace

TEST_CASE("a plan within the limits passes", "[worker_limits]") {
  auto job = load(kWide, {"parallelism=4"});
  CHECK(job.plan.tasks.size() == 4 + 2 + 1);
  CHECK(pipeline::check_worker_limits(job.spec, job.plan, limits(7, 7)).empty());
}

TEST_CASE("too many workers per job points at the parallelism that causes it", "[worker_limits]") {
  auto job = load(kWide);
  auto found = pipeline::check_worker_limits(job.spec, job.plan, limits(1024, 100000));
  REQUIRE(found.size() == 1);
  CHECK(found.items()[0].to_string() ==
        "w.toml:3:15: the job needs 32771 worker processes, above the limit of 1024 per job (chain "
        "'g' has "
        "parallelism 32768); raise the limit with --max-workers N, or lower the parallelism");
}

TEST_CASE("a parallelism from an override is placed in the override", "[worker_limits]") {
  auto job = load(kWide, {"sources.g.parallelism=5000"});
  auto found = pipeline::check_worker_limits(job.spec, job.plan, limits(1024, 100000));
  REQUIRE(found.size() == 1);
  CHECK(found.items()[0].where.file == "<--set>");
  CHECK(found.items()[0].where.line == 1);
}

TEST_CASE("too many chains of parallelism 1 point at the node past the limit", "[worker_limits]") {
  std::string text = "name = \"m\"\n[sources.g]\ntype = \"generator\"\n";
  std::string inputs;
  for (int k = 0; k < 10; ++k) {
    text += "[operators.f" + std::to_string(k) +
            "]\ntype = \"filter\"\ninputs = [\"g\"]\nwhere = \"true\"\n";
    inputs += (k ? ", \"f" : "\"f") + std::to_string(k) + "\"";
  }
  text += "[sinks.out]\ntype = \"stdout\"\ninputs = [" + inputs + "]\n";
  auto job = load(text);
  REQUIRE(job.plan.tasks.size() == 12);
  auto found = pipeline::check_worker_limits(job.spec, job.plan, limits(5, 100));
  REQUIRE(found.size() == 1);
  CHECK_THAT(found.items()[0].message,
             Catch::Contains("12 chains of nodes that do not fuse; operator 'f4' "
                             "starts worker 6"));
  CHECK(found.items()[0].where.line == 20); // [operators.f4]
}

TEST_CASE("the per-host limit counts the workers of other jobs and names its flag",
          "[worker_limits]") {
  auto job = load(kWide, {"parallelism=4"});
  CHECK(pipeline::check_worker_limits(job.spec, job.plan, limits(100, 10, 3)).empty());
  auto found = pipeline::check_worker_limits(job.spec, job.plan, limits(100, 10, 4));
  REQUIRE(found.size() == 1);
  CHECK_THAT(found.items()[0].message,
             Catch::StartsWith(
                 "the job needs 7 worker processes and other jobs run 4 here, above the limit "
                 "of 10 per host (test; chain 'g' has parallelism 4); raise the limit with "
                 "--max-host-workers N"));
}
