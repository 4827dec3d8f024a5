#include <catch2/catch.hpp>

#include <algorithm>

#include "operators/registry.hpp"
#include "operators/window_combiner.hpp"
#include "pipeline/runtime/field_presence.hpp"
#include "pipeline/runtime/job_loader.hpp"

using namespace streamctl;
using runtime::FieldPresence;
using runtime::FieldPresenceReport;

namespace {

// Two sources (never read here: the test hands the operators its own records), a filter
// reading `where`'s fields, a keyed window on `key`, and a join of the filter with the second
// source, `user` on the left and `id` on the right.
const std::string pipeline_text = R"toml(name = "p"
[sources.clicks]
type = "generator"
profile = "clicks"
[sources.users]
type = "generator"
profile = "clicks"
[operators.ok]
type = "filter"
inputs = ["clicks"]
where = "WHERE"
[operators.per_user]
type = "window"
inputs = ["ok"]
key = ["KEY"]
window = { kind = "tumbling", size = "1s" }
aggregates = { n = "count()", total = "sum(price)" }
[operators.named]
type = "join"
inputs = ["ok", "users"]
on = { left = "user", right = "id" }
window = { kind = "tumbling", size = "1s" }
[sinks.out]
type = "stdout"
inputs = ["per_user"]
[sinks.out2]
type = "stdout"
inputs = ["named"]
)toml";

struct Fixture {
  operators::Registry registry;
  state::FieldNames names;
  runtime::LoadedJob job;

  explicit Fixture(const std::string& where = "usr == 'a'", const std::string& key = "user") {
    operators::register_builtin_types(registry);
    std::string text = pipeline_text;
    text.replace(text.find("WHERE"), 5, where);
    text.replace(text.find("KEY"), 3, key);
    job = runtime::load_job_text(text, "p.toml", std::filesystem::current_path(), {}, registry);
  }

  std::size_t index(const std::string& name) const {
    return job.spec.index_of(*job.spec.find(name));
  }

  // Records with the given fields (each value an integer).
  state::Batch batch(const std::vector<std::vector<std::string>>& records) {
    state::Batch out;
    state::RecordBuilder b;
    for (const auto& fields : records) {
      b.reset();
      for (const auto& f : fields)
        b.append(names.intern(f), state::Value::integer(1));
      b.finish(out);
    }
    return out;
  }
};

std::vector<std::string> describe(const Fixture& f,
                                  const std::vector<FieldPresenceReport>& reports) {
  return runtime::describe_unseen_fields(f.job.spec, reports);
}

} // namespace

TEST_CASE("a filter on a field no record has is reported with a suggestion", "[field_presence]") {
  Fixture f;
  FieldPresence presence(f.job.spec, {f.index("ok")}, f.registry, f.names);
  presence.observe(0, 0, f.batch({{"user", "url"}, {"user", "price"}}));
  auto reports = presence.reports();
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].node == "ok");
  CHECK(reports[0].checked == 2);
  CHECK(reports[0].unseen == std::vector<std::string>{"usr"});
  auto lines = describe(f, reports);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] ==
        "p.toml:8:1: filter 'ok' reads field 'usr', which none of the 2 records it read had "
        "(did you mean 'user'?)");
}

TEST_CASE("a field that some records have is not reported", "[field_presence]") {
  Fixture f("user == 'a'");
  FieldPresence presence(f.job.spec, {f.index("ok")}, f.registry, f.names);
  presence.observe(0, 0, f.batch({{"url"}, {"url", "user"}}));
  auto reports = presence.reports();
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].unseen.empty());
  CHECK(reports[0].had.empty()); // sent only when something is unseen
  CHECK(describe(f, reports).empty());
}

TEST_CASE("only the first records are looked at, then observing costs nothing",
          "[field_presence]") {
  Fixture f("user == 'a'");
  FieldPresence presence(f.job.spec, {f.index("ok")}, f.registry, f.names);
  std::vector<std::vector<std::string>> without(runtime::kFieldPresenceRecords + 10, {"url"});
  presence.observe(0, 0, f.batch(without));
  presence.observe(0, 0, f.batch({{"user"}})); // past the first records: not looked at
  auto reports = presence.reports();
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].checked == runtime::kFieldPresenceRecords);
  auto lines = describe(f, reports);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].find("which none of the first 1024 records it read had") != std::string::npos);
}

TEST_CASE(
    "a window's key and aggregate arguments are checked; nested paths by their top-level name",
    "[field_presence]") {
  Fixture f("user == 'a'", "usr_id.inner");
  FieldPresence presence(f.job.spec, {f.index("ok"), f.index("per_user")}, f.registry, f.names);
  presence.observe(1, 0, f.batch({{"user", "price"}, {"user"}}));
  auto lines = describe(f, presence.reports());
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].rfind(
            "p.toml:12:1: window 'per_user' reads field 'usr_id', which none of the 2 records",
            0) == 0);
}

TEST_CASE("a window fed partial aggregates passes over them: only whole records count",
          "[field_presence]") {
  Fixture f("user == 'a'", "usr_id");
  f.job.spec.combined_nodes.assign(f.job.spec.nodes.size(), false);
  f.job.spec.combined_nodes[f.index("per_user")] = true;
  FieldPresence presence(f.job.spec, {f.index("per_user")}, f.registry, f.names);
  std::string key(operators::kPartialKeyField), state(operators::kPartialStateField);
  presence.observe(0, 0, f.batch({{key, state}, {key, state}}));
  CHECK(presence.reports().empty()); // partials only: nothing to say

  presence.observe(0, 0, f.batch({{key, state}, {"user", "price"}}));
  auto reports = presence.reports();
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].checked == 1);
  CHECK(reports[0].unseen == std::vector<std::string>{"usr_id"});
  CHECK(std::find(reports[0].had.begin(), reports[0].had.end(), key) == reports[0].had.end());

  // Partials count toward the records looked at, so that observing stops costing after them.
  std::vector<std::vector<std::string>> partials(runtime::kFieldPresenceRecords, {key, state});
  presence.observe(0, 0, f.batch(partials));
  presence.observe(0, 0, f.batch({{"usr_id"}}));
  CHECK(presence.reports()[0].unseen == std::vector<std::string>{"usr_id"});
}

TEST_CASE("a join is checked per input, and the message names the input", "[field_presence]") {
  Fixture f("user == 'a'");
  FieldPresence presence(f.job.spec, {f.index("named")}, f.registry, f.names);
  presence.observe(0, 0, f.batch({{"user"}}));
  presence.observe(0, 1, f.batch({{"ids"}}));
  auto lines = describe(f, presence.reports());
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] ==
        "p.toml:18:1: join 'named' reads field 'id' of input 'users', which none of the 1 records "
        "it read had (did you mean 'ids'?)");
}

TEST_CASE("a field is reported only when no subtask saw it, and a subtask that read nothing does "
          "not count",
          "[field_presence]") {
  Fixture f;
  FieldPresenceReport missed{"ok", 0, 5, {"usr"}, {"user"}};
  FieldPresenceReport saw{"ok", 0, 3, {}, {}};
  CHECK(describe(f, {missed, saw}).empty());
  auto lines = describe(f, {missed, missed});
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].find("none of the 10 records") != std::string::npos);
  CHECK(describe(f, {FieldPresenceReport{"ok", 0, 0, {"usr"}, {}}}).empty());
  // An operator that read nothing sends no report.
  FieldPresence presence(f.job.spec, {f.index("ok")}, f.registry, f.names);
  CHECK(presence.reports().empty());
}

TEST_CASE("reports survive the FINISHED message, odd names included", "[field_presence]") {
  std::vector<FieldPresenceReport> reports{
      {"ok", 0, 1024, {"usr", "a,b%c\td\ne"}, {"user", "x"}},
      {"named", 1, 3, {}, {}},
  };
  CHECK(runtime::decode_field_presence(runtime::encode_field_presence(reports)) == reports);
  CHECK(runtime::decode_field_presence("").empty());
  CHECK(runtime::decode_field_presence("garbage\nok\tx\t1\t\t").empty());
}
