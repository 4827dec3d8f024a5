#include <catch2/catch.hpp>

#include "operators/registry.hpp"
#include "pipeline/runtime/job_loader.hpp"
#include "pipeline/spec/lint.hpp"

using namespace streamctl;

namespace {

std::vector<std::string> lint(const std::string& text) {
  operators::Registry registry;
  operators::register_builtin_types(registry);
  auto job = runtime::load_job_text(text, "lint.toml", std::filesystem::current_path(), {}, registry);
  return pipeline::lint_pipeline(job.spec, runtime::catalog_of(registry));
}

const std::string clicks_count = R"toml(name = "p"
[sources.g]
type = "generator"
profile = "clicks"
event_time = "ts"
[operators.ok]
type = "filter"
inputs = ["g"]
where = "WHERE"
[operators.per_user]
type = "window"
inputs = ["ok"]
key = ["KEY"]
window = { kind = "tumbling", size = "1s" }
aggregates = { n = "count()" }
[sinks.out]
type = "stdout"
inputs = ["per_user"]
)toml";

std::string with(std::string text, const std::string& where, const std::string& key) {
  text.replace(text.find("WHERE"), 5, where);
  text.replace(text.find("KEY"), 3, key);
  return text;
}

} // namespace

TEST_CASE("lint names a field no generator record has, where it is read, with the nearest name",
          "[lint]") {
  auto warnings = lint(with(clicks_count, "staus == 200", "usr"));
  REQUIRE(warnings.size() == 2);
  CHECK_THAT(warnings[0], Catch::StartsWith("lint.toml:7:8: warning: operator 'ok' reads field "
                                            "'staus', which source 'g' never makes"));
  CHECK_THAT(warnings[0], Catch::EndsWith("did you mean 'status'?"));
  CHECK_THAT(warnings[1], Catch::StartsWith("lint.toml:11:8: warning: operator 'per_user' reads "
                                            "field 'usr'"));
  CHECK_THAT(warnings[1], Catch::EndsWith("did you mean 'user'?"));
}

TEST_CASE("lint is silent for a correct pipeline", "[lint]") {
  CHECK(lint(with(clicks_count, "status == 200", "user")).empty());
  // A field made by a map on the way is no mistake.
  CHECK(lint(R"toml(name = "p"
[sources.g]
type = "generator"
event_time = "ts"
[operators.m]
type = "map"
inputs = ["g"]
set = { bucket = "seq % 10" }
[operators.per_bucket]
type = "reduce"
inputs = ["m"]
key = ["bucket"]
aggregates = { n = "count()" }
[sinks.out]
type = "stdout"
inputs = ["per_bucket"]
)toml")
            .empty());
}

TEST_CASE("lint cannot tell the fields of a file, nor behind a sink that writes whole records",
          "[lint]") {
  CHECK(lint(R"toml(name = "p"
[sources.in]
type = "stdin"
[operators.ok]
type = "filter"
inputs = ["in"]
where = "staus == 200"
[sinks.out]
type = "stdout"
inputs = ["ok"]
)toml")
            .empty());
}

TEST_CASE("lint warns of a window or join without event time upstream", "[lint]") {
  std::string text = clicks_count;
  text.replace(text.find("event_time = \"ts\"\n"), 18, "");
  auto warnings = lint(with(text, "status == 200", "user"));
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(warnings[0], Catch::StartsWith("lint.toml:10:8: warning: window 'per_user' has no "
                                            "source with 'event_time' upstream"));
  // A dedup uses processing time by design (SPEC §6): no warning.
  CHECK(lint(R"toml(name = "p"
[sources.g]
type = "generator"
[operators.d]
type = "dedup"
inputs = ["g"]
key = ["seq"]
within = "1s"
[sinks.out]
type = "stdout"
inputs = ["d"]
)toml")
            .empty());
}
