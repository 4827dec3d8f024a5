#include <catch2/catch.hpp>

#include "operators/registry.hpp"
#include "pipeline/runtime/job_loader.hpp"

using namespace streamctl;

namespace {

runtime::LoadedJob load(const std::string& text) {
  operators::Registry registry;
  operators::register_builtin_types(registry);
  return runtime::load_job_text(text, "projection.toml", std::filesystem::current_path(), {}, registry);
}

pipeline::FieldSet names(std::initializer_list<const char*> list) {
  pipeline::FieldSet out;
  for (const char* n : list) out.add(n);
  return out;
}

std::size_t node(const runtime::LoadedJob& job, const std::string& name) {
  return job.spec.index_of(*job.spec.find(name));
}

} // namespace

TEST_CASE("a keyed count reads only its key and its aggregates' arguments", "[projection]") {
  auto job = load(R"toml(name = "p"
[sources.g]
type = "generator"
profile = "clicks"
event_time = "ts / 1000"
[operators.big]
type = "filter"
inputs = ["g"]
where = "bytes > 100"
[operators.per_user]
type = "window"
inputs = ["big"]
key = ["user"]
window = { kind = "tumbling", size = "1s" }
aggregates = { n = "count()", most = "max(status)" }
[sinks.out]
type = "stdout"
inputs = ["per_user"]
)toml");
  CHECK(job.spec.fields_read(node(job, "per_user"), 0) == names({"status", "user"}));
  CHECK(job.spec.fields_read(node(job, "big"), 0) == names({"bytes", "status", "user"}));
  // The source also makes what its event_time reads.
  CHECK(job.spec.fields_emitted(node(job, "g")) == names({"bytes", "status", "ts", "user"}));
  CHECK(job.spec.fields_read(node(job, "out"), 0).all);
}

TEST_CASE("a sink that writes whole records needs every field upstream", "[projection]") {
  auto job = load(R"toml(name = "p"
[sources.g]
type = "generator"
[operators.ok]
type = "filter"
inputs = ["g"]
where = "seq > 1"
[sinks.out]
type = "stdout"
inputs = ["ok"]
)toml");
  CHECK(job.spec.fields_read(node(job, "ok"), 0).all);
  CHECK(job.spec.fields_emitted(node(job, "g")).all);
}

TEST_CASE("a map reads what its expressions read and the old names of what it renames", "[projection]") {
  auto job = load(R"toml(name = "p"
[sources.g]
type = "generator"
profile = "clicks"
[operators.m]
type = "map"
inputs = ["g"]
set = { kb = "bytes / 1024", user = "lower(user)" }
rename = { page = "path" }
remove = ["status"]
[operators.per_path]
type = "reduce"
inputs = ["m"]
key = ["path", "user"]
aggregates = { kb = "sum(kb)" }
[sinks.out]
type = "stdout"
inputs = ["per_path"]
)toml");
  // kb is made by `set` from bytes; user is set from itself; path comes from page.
  CHECK(job.spec.fields_read(node(job, "m"), 0) == names({"bytes", "page", "path", "user"}));
  CHECK(job.spec.fields_read(node(job, "per_path"), 0) == names({"kb", "path", "user"}));
}

TEST_CASE("two consumers of one source: the source makes what either reads", "[projection]") {
  auto job = load(R"toml(name = "p"
[sources.g]
type = "generator"
profile = "clicks"
[operators.a]
type = "reduce"
inputs = ["g"]
key = ["user"]
aggregates = { n = "count()" }
[operators.b]
type = "reduce"
inputs = ["g"]
key = ["page"]
aggregates = { n = "count()" }
[sinks.out]
type = "stdout"
inputs = ["a", "b"]
)toml");
  CHECK(job.spec.fields_read(node(job, "a"), 0) == names({"user"}));
  CHECK(job.spec.fields_read(node(job, "b"), 0) == names({"page"}));
  CHECK(job.spec.fields_emitted(node(job, "g")) == names({"page", "user"}));
}

TEST_CASE("a window's late output passes what its consumers read", "[projection]") {
  auto job = load(R"toml(name = "p"
[sources.g]
type = "generator"
profile = "clicks"
event_time = "ts"
[operators.w]
type = "window"
inputs = ["g"]
key = ["user"]
window = { kind = "tumbling", size = "1s" }
aggregates = { n = "count()" }
late_output = "late"
[sinks.out]
type = "stdout"
inputs = ["w"]
[sinks.late_out]
type = "stdout"
inputs = ["late"]
)toml");
  CHECK(job.spec.fields_read(node(job, "w"), 0).all);
}

TEST_CASE("nodes that report bad records whole and projection = false read everything",
          "[projection]") {
  const std::string base = R"toml(name = "p"
[sources.g]
type = "generator"
profile = "clicks"
[operators.f]
type = "filter"
inputs = ["g"]
where = "status == 200"
ON_ERROR
[operators.r]
type = "reduce"
inputs = ["f"]
key = ["user"]
aggregates = { n = "count()" }
[sinks.out]
type = "stdout"
inputs = ["r"]
)toml";
  auto with = [&](const std::string& on_error, const std::string& top = "") {
    std::string text = base;
    text.replace(text.find("ON_ERROR"), 8, on_error);
    return load(top + text);
  };
  // Nodes are numbered sources, operators, sinks: g 0, f 1, r 2, out 3.
  CHECK(with("").spec.fields_read(1, 0) == names({"status", "user"}));
  CHECK(with("").spec.fields_read(2, 0) == names({"user"}));
  CHECK(with("on_error = \"fail\"").spec.fields_read(1, 0).all);
  CHECK(with("on_error = \"fail\"").spec.fields_read(2, 0) == names({"user"}));
  CHECK(with("on_error = \"fail\"").spec.fields_emitted(0).all);
  CHECK(with("", "projection = false\n").spec.fields_read(2, 0).all);
  CHECK(with("", "projection = false\n").spec.fields_emitted(0).all);
}

TEST_CASE("a join reads its keys and what its select reads of each side", "[projection]") {
  const std::string base = R"toml(name = "p"
[sources.events]
type = "generator"
profile = "nexmark"
[operators.persons]
type = "filter"
inputs = ["events"]
where = "event_type == \"person\""
[operators.auctions]
type = "filter"
inputs = ["events"]
where = "event_type == \"auction\""
[operators.j]
type = "join"
inputs = ["persons", "auctions"]
on = { left = "id", right = "seller" }
window = { kind = "tumbling", size = "10s" }
SELECT
[operators.r]
type = "reduce"
inputs = ["j"]
key = ["name"]
aggregates = { n = "count()" }
[sinks.out]
type = "stdout"
inputs = ["r"]
)toml";
  auto with = [&](const std::string& select) {
    std::string text = base;
    text.replace(text.find("SELECT"), 6, select);
    return load(text);
  };
  {
    auto job = with(R"(select = { name = "left.name", reserve = "right.reserve * 2", seller = "right.seller" })");
    const std::size_t j = node(job, "j");
    CHECK(job.spec.fields_read(j, 0) == names({"id", "name"}));
    CHECK(job.spec.fields_read(j, 1) == names({"reserve", "seller"}));
    CHECK(job.spec.fields_read(node(job, "persons"), 0) == names({"event_type", "id", "name"}));
    CHECK(job.spec.fields_emitted(node(job, "events")) ==
          names({"event_type", "id", "name", "reserve", "seller"}));
  }
  {
    // Without select the output is the left's fields then the right's: both sides give what
    // is read downstream, besides their keys.
    auto job = with("");
    const std::size_t j = node(job, "j");
    CHECK(job.spec.fields_read(j, 0) == names({"id", "name"}));
    CHECK(job.spec.fields_read(j, 1) == names({"name", "seller"}));
  }
  {
    // A side read whole (a function of the map, an index) needs every field of that side.
    auto job = with(R"x(select = { name = "left.name", all = "len(right)" })x");
    CHECK(job.spec.fields_read(node(job, "j"), 0) == names({"id", "name"}));
    CHECK(job.spec.fields_read(node(job, "j"), 1).all);
    auto indexed = with(R"(select = { name = "left[\"name\"]" })");
    CHECK(indexed.spec.fields_read(node(indexed, "j"), 0).all);
  }
}

// A map that removes fields before a sink of whole records made its source keep every field
// (the bench's file -> filter -> map -> file parsed `ts` on every line for nothing): the source
// now makes every field but the removed ones that nothing upstream of the map reads.
TEST_CASE("a map's remove before a sink of whole records leaves those fields out upstream", "[projection]") {
  auto job = load(R"toml(name = "p"
[sources.in]
type = "stdin"
[operators.ok]
type = "filter"
inputs = ["in"]
where = "status == 200"
[operators.slim]
type = "map"
inputs = ["ok"]
remove = ["ts", "status", "debug"]
set = { kb = "bytes / 1024", debug = "1" }
[sinks.out]
type = "stdout"
inputs = ["slim"]
)toml");
  pipeline::FieldSet slim = job.spec.fields_read(node(job, "slim"), 0);
  CHECK(slim.all);
  // kb and debug, which `set` assigns, are read all the same: an overwritten field keeps its
  // place in the record, which projection must not change.
  CHECK(slim.except == std::set<std::string>{"debug", "status", "ts"});
  CHECK(slim.contains("bytes"));
  CHECK(slim.contains("user"));
  pipeline::FieldSet source = job.spec.fields_emitted(node(job, "in"));
  CHECK(source.except == std::set<std::string>{"debug", "ts"}); // the filter reads status
  CHECK(source.contains("status"));
  CHECK_FALSE(source.every_field());
}

TEST_CASE("field sets: every field but some, united with others", "[projection]") {
  pipeline::FieldSet a = pipeline::FieldSet::everything();
  a.leave_out("x");
  a.leave_out("y");
  CHECK(a.all);
  CHECK_FALSE(a.contains("x"));
  CHECK(a.contains("z"));
  pipeline::FieldSet b = pipeline::FieldSet::everything();
  b.leave_out("y");
  b.leave_out("w");
  pipeline::FieldSet both = a;
  both.add(b); // left out only where both leave it out
  CHECK(both.except == std::set<std::string>{"y"});
  pipeline::FieldSet listed = names({"y", "q"});
  pipeline::FieldSet with_list = a;
  with_list.add(listed);
  CHECK(with_list.except == std::set<std::string>{"x"});
  pipeline::FieldSet list_first = listed;
  list_first.add(a);
  CHECK(list_first == with_list);
  with_list.add("x");
  CHECK(with_list.every_field());
  pipeline::FieldSet small = names({"x", "y"});
  small.leave_out("x");
  CHECK(small == names({"y"}));
}
