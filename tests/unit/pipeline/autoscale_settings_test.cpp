#include <catch2/catch.hpp>

#include "operators/registry.hpp"
#include "pipeline/runtime/autoscale_settings.hpp"
#include "pipeline/runtime/job_loader.hpp"

using namespace streamctl;

namespace {
runtime::LoadedJob load(const std::string& extra) {
  operators::Registry registry;
  operators::register_builtin_types(registry);
  return runtime::load_job_text(R"toml(name = "a"
max_parallelism = 64
[sources.g]
type = "generator"
[sinks.out]
type = "stdout"
inputs = ["g"]
)toml" + extra,
                                "a.toml", std::filesystem::current_path(), {}, registry);
}
} // namespace

TEST_CASE("[autoscale] absent: disabled, with defaults bounded by the job", "[autoscale]") {
  auto s = runtime::autoscale_settings_of(load("").spec);
  CHECK_FALSE(s.enabled);
  CHECK(s.min_parallelism == 1);
  CHECK(s.max_parallelism == 64); // the job's max_parallelism
  CHECK(s.interval == std::chrono::seconds(30));
  CHECK(s.target_utilization == 0.7);
  CHECK(s.cooldown == std::chrono::seconds(60));
}

TEST_CASE("[autoscale] keys are read as written", "[autoscale]") {
  auto s = runtime::autoscale_settings_of(load(R"toml([autoscale]
enabled = true
min_parallelism = 2
max_parallelism = 8
interval = "10s"
target_utilization = 0.5
cooldown = "2m"
)toml")
                                              .spec);
  CHECK(s.enabled);
  CHECK(s.min_parallelism == 2);
  CHECK(s.max_parallelism == 8);
  CHECK(s.interval == std::chrono::seconds(10));
  CHECK(s.target_utilization == 0.5);
  CHECK(s.cooldown == std::chrono::minutes(2));
  // An int utilization is accepted (1 is the only valid one).
  CHECK(runtime::autoscale_settings_of(load("[autoscale]\ntarget_utilization = 1\n").spec)
            .target_utilization == 1.0);
}
