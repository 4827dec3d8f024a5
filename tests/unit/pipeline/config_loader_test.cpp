#include <catch2/catch.hpp>

#include <fstream>
#include <string>
#include <unistd.h>

#include "operators/file_source.hpp"
#include "pipeline/spec/config_loader.hpp"

using namespace streamctl::pipeline;

namespace {

KeySchema key(std::string name, KeyType type, bool required = false,
              std::vector<std::string> choices = {}, std::vector<KeySchema> children = {}) {
  KeySchema k;
  k.name = std::move(name);
  k.type = type;
  k.required = required;
  k.choices = std::move(choices);
  k.children = std::move(children);
  return k;
}

NodeTypeSchema node_type(std::string type, std::vector<KeySchema> keys, bool takes_inputs = true,
                         bool single_instance = false) {
  NodeTypeSchema s;
  s.type = std::move(type);
  s.keys = std::move(keys);
  s.takes_inputs = takes_inputs;
  s.single_instance = single_instance;
  return s;
}

// A small stand-in for operators/registry.cpp.
const SchemaCatalog& catalog() {
  static const SchemaCatalog c = [] {
    SchemaCatalog cat;
    cat.sources = {
        node_type(
            "file",
            {key("path", KeyType::String, true),
             key("format", KeyType::Enum, false, {"json", "csv", "lines"}),
             key("event_time", KeyType::Expression),
             key("watermark", KeyType::Table, false, {},
                 {key("max_delay", KeyType::Duration), key("idle_timeout", KeyType::Duration)})},
            false),
        node_type("generator",
                  {key("profile", KeyType::Enum, false, {"counter", "clicks", "nexmark"}),
                   key("rate", KeyType::Float), key("count", KeyType::Int),
                   key("interval", KeyType::Duration)},
                  false),
        node_type("stdin", {key("format", KeyType::Enum, false, {"json", "csv", "lines"})}, false,
                  true),
    };
    cat.operators = {
        node_type("filter", {key("where", KeyType::Expression, true)}),
        node_type("map", {key("set", KeyType::ExpressionMap), key("rename", KeyType::StringMap),
                          key("remove", KeyType::StringArray)}),
        node_type("window",
                  {key("key", KeyType::StringArray),
                   key("window", KeyType::Table, true, {},
                       {key("kind", KeyType::Enum, true, {"tumbling", "sliding", "session"}),
                        key("size", KeyType::Duration)}),
                   // Aggregates are not plain expressions (count() would not compile):
                   // the window compiles them itself.
                   key("aggregates", KeyType::StringMap), key("late_output", KeyType::String)}),
        node_type("dedup", {key("within", KeyType::Duration), key("memory", KeyType::Size),
                            key("exact", KeyType::Bool)}),
    };
    cat.sinks = {
        node_type("stdout", {key("format", KeyType::Enum, false, {"json"})}, true, true),
        node_type("file", {key("path", KeyType::String, true)}),
    };
    return cat;
  }();
  return c;
}

LoadResult load(std::string_view text, const std::vector<std::string>& overrides = {}) {
  return load_pipeline_text(text, "p.toml", "/base/dir", overrides, catalog());
}

std::string all(const LoadResult& r) {
  std::string out;
  for (const auto& d : r.diagnostics) out += d.to_string() + "\n";
  return out;
}

// True when a diagnostic reads "AT: ..." and contains `text`.
bool has(const LoadResult& r, const std::string& at, const std::string& text) {
  for (const auto& d : r.diagnostics) {
    std::string s = d.to_string();
    if (s.rfind(at + ": ", 0) == 0 && s.find(text) != std::string::npos) return true;
  }
  return false;
}

#define CHECK_DIAG(result, at, text)                                                               \
  do {                                                                                             \
    INFO("diagnostics:\n" << all(result));                                                         \
    CHECK(has(result, at, text));                                                                  \
  } while (0)

// A valid pipeline to break one thing at a time: line 1 is `name`.
const std::string valid_head = R"toml(name = "views"
[sources.clicks]
type = "file"
path = "clicks.jsonl"
[operators.ok]
type = "filter"
inputs = ["clicks"]
where = "status == 200"
[sinks.out]
type = "stdout"
inputs = ["ok"]
)toml";

} // namespace

TEST_CASE("a valid pipeline with every feature builds the spec", "[config]") {
  const char* text = R"toml(name = "page-views"
parallelism = 2
max_parallelism = 64
buffer_timeout = "5ms"
batch_size = 500

[checkpoint]
interval = "5s"
dir = "checkpoints"
mode = "exactly-once"
retain = 3
timeout = "1m"

[restart]
strategy = "exponential"
max_attempts = 5
delay = "1s"

[cluster]
hosts = ["worker1", { host = "worker3", slots = 4 }]
launcher = "ssh"
ssh_options = ["-oBatchMode=yes"]

[metrics]
listen = "127.0.0.1:9250"

[sources.zeta]
type = "generator"
profile = "counter"
rate = 10
count = 100

[sources.alpha]
type = "file"
path = "clicks.jsonl"
format = "json"
event_time = "ts"
watermark = { max_delay = "2s", idle_timeout = "30s" }
on_error = "dead_letter"
dead_letter = "bad/clicks.jsonl"

[operators.ok]
type = "filter"
inputs = ["alpha", "zeta"]
where = "status == 200 && bytes > 0"
on_error = "fail"

[operators.per_user]
type = "window"
inputs = ["ok"]
key = ["user"]
window = { kind = "tumbling", size = "1m" }
aggregates = { views = "count()", bytes = "sum(bytes)" }
late_output = "late"
parallelism = 4
partition = "rebalance"

[operators.cleanup]
type = "map"
inputs = ["per_user"]
set = { total = "views * 2" }
rename = { bytes = "size" }
remove = ["tmp"]

[sinks.out]
type = "stdout"
inputs = ["cleanup"]

[sinks.late_file]
type = "file"
inputs = ["late"]
path = "/var/tmp/late"
dead_letter = "/abs/dead.jsonl"
on_error = "dead_letter"

[[test]]
name = "counts per user"
input.alpha = ['{"ts": 0, "user": "a", "status": 200, "bytes": 1}']
expect.out = ['{"user": "a", "views": 1}']

[[test]]
name = "nothing in"
input.zeta = []
)toml";
  auto r = load(text);
  INFO(all(r));
  REQUIRE(r.diagnostics.empty());
  REQUIRE(r.spec);
  const PipelineSpec& s = *r.spec;
  CHECK(s.name == "page-views");
  CHECK(s.file == "p.toml");
  CHECK(s.base_dir == "/base/dir");
  CHECK(s.parallelism == 2);
  CHECK(s.max_parallelism == 64);

  // Sources, then operators, then sinks; each in file order (not toml++'s key order).
  std::vector<std::string> names;
  for (const auto& n : s.nodes) names.push_back(n.name);
  CHECK(names ==
        std::vector<std::string>{"zeta", "alpha", "ok", "per_user", "cleanup", "out", "late_file"});

  const NodeSpec& zeta = s.nodes[0];
  CHECK(zeta.role == NodeRole::Source);
  CHECK(zeta.type == "generator");
  CHECK(zeta.inputs.empty());
  CHECK(zeta.parallelism == 0);
  CHECK_FALSE(zeta.partition.has_value());
  CHECK(zeta.on_error == OnError::Drop);
  CHECK(zeta.dead_letter.empty());
  CHECK(zeta.where.file == "p.toml");
  CHECK(zeta.where.line == 27);
  CHECK(zeta.where.column == 1);

  const NodeSpec& alpha = s.nodes[1];
  CHECK(alpha.on_error == OnError::DeadLetter);
  CHECK(alpha.dead_letter == "/base/dir/bad/clicks.jsonl");
  CHECK(alpha.config["path"].value_or(std::string()) == "clicks.jsonl");
  CHECK(alpha.config["watermark"]["max_delay"].value_or(std::string()) == "2s");
  // The config keeps its positions, for errors found later by the operator.
  REQUIRE(alpha.config.get("path"));
  CHECK(alpha.config.get("path")->source().begin.line == 35);

  const NodeSpec& ok = s.nodes[2];
  CHECK(ok.role == NodeRole::Operator);
  CHECK(ok.inputs == std::vector<std::string>{"alpha", "zeta"});
  CHECK(ok.on_error == OnError::Fail);

  const NodeSpec& per_user = s.nodes[3];
  CHECK(per_user.parallelism == 4);
  REQUIRE(per_user.partition.has_value());
  CHECK(*per_user.partition == Partition::Rebalance);

  const NodeSpec& out = s.nodes[5];
  CHECK(out.role == NodeRole::Sink);
  CHECK(out.parallelism == 1);                                  // stdout is a single instance
  CHECK(s.nodes[6].inputs == std::vector<std::string>{"late"}); // a window's late output
  CHECK(s.nodes[6].dead_letter == "/abs/dead.jsonl");

  REQUIRE(s.tests.size() == 2);
  CHECK(s.tests[0].name == "counts per user");
  CHECK(s.tests[0].input.at("alpha").size() == 1);
  CHECK(s.tests[0].expect.at("out") == std::vector<std::string>{R"x({"user": "a", "views": 1})x"});
  CHECK(s.tests[0].where.line == 76);
  CHECK(s.tests[1].input.at("zeta").empty());

  // The root is the whole document, with positions.
  CHECK(s.root["checkpoint"]["mode"].value_or(std::string()) == "exactly-once");
  CHECK(s.root["buffer_timeout"].value_or(std::string()) == "5ms");
  REQUIRE(s.root.get("batch_size"));
  CHECK(s.root.get("batch_size")->source().begin.line == 5);
}

TEST_CASE("defaults: parallelism 1, max_parallelism 128", "[config]") {
  auto r = load(valid_head);
  INFO(all(r));
  REQUIRE(r.spec);
  CHECK(r.spec->parallelism == 1);
  CHECK(r.spec->max_parallelism == 128);
  CHECK(r.spec->nodes[1].parallelism == 0);
  CHECK(r.spec->parallelism_of(r.spec->nodes[1]) == 1);
}

TEST_CASE("a TOML syntax error is one diagnostic and nothing else", "[config]") {
  auto r = load("name = \"x\"\nparallelism = \nfoo = [1,\n", {"nope"});
  REQUIRE(r.diagnostics.size() == 1);
  CHECK_FALSE(r.spec);
  CHECK_DIAG(r, "p.toml:2:15", "expected value");
}

TEST_CASE("the job name is required and checked", "[config]") {
  auto r = load(valid_head.substr(valid_head.find('\n') + 1));
  CHECK_DIAG(r, "p.toml:1:1", "the pipeline needs 'name'");
  CHECK_FALSE(r.spec);

  r = load("name = \"Page Views\"\n" + valid_head.substr(valid_head.find('\n') + 1));
  CHECK_DIAG(r, "p.toml:1:8",
             "'name' must be lowercase letters, digits, '_' and '-', got 'Page Views'");
}

TEST_CASE("wrong types name the key, the expected and the actual type", "[config]") {
  auto r = load("parallelism = \"4\"\n" + valid_head);
  CHECK_DIAG(r, "p.toml:1:15", "'parallelism' must be an integer, got string");
  r = load("checkpoint = 5\n" + valid_head);
  CHECK_DIAG(r, "p.toml:1:14", "'checkpoint' must be a table, got integer");
  r = load(valid_head + "[operators.m]\ntype = \"map\"\ninputs = [\"ok\"]\nremove = [\"a\", 2]\n"
                        "rename = { a = 1 }\n");
  CHECK_DIAG(r, "p.toml:15:16", "'remove[1]' must be a string, got integer");
  CHECK_DIAG(r, "p.toml:16:16", "'rename.a' must be a string, got integer");
}

TEST_CASE("parallelism and batch_size must be at least 1", "[config]") {
  auto r = load("parallelism = 0\nbatch_size = -3\n" + valid_head);
  CHECK_DIAG(r, "p.toml:1:15", "'parallelism' must be at least 1, got 0");
  CHECK_DIAG(r, "p.toml:2:14", "'batch_size' must be at least 1, got -3");
}

TEST_CASE("max_parallelism bounds every parallelism", "[config]") {
  auto r = load("parallelism = 8\nmax_parallelism = 4\n" + valid_head +
                "[sinks.f]\ntype = \"file\"\npath = \"x\"\ninputs = [\"ok\"]\nparallelism = 6\n");
  CHECK_DIAG(r, "p.toml:1:15", "'parallelism' (8) is above max_parallelism (4)");
  CHECK_DIAG(r, "p.toml:18:15", "'parallelism' of sink 'f' (6) is above max_parallelism (4)");
  r = load("max_parallelism = 0\n" + valid_head);
  CHECK_DIAG(r, "p.toml:1:19", "'max_parallelism' must be at least 1");
  r = load("max_parallelism = 100000\n" + valid_head);
  CHECK_DIAG(r, "p.toml:1:19", "'max_parallelism' must be at most 32768");
}

TEST_CASE("an unknown top-level key suggests the closest or lists the valid ones", "[config]") {
  auto r = load("paralelism = 2\nzzz = 1\n" + valid_head);
  CHECK_DIAG(r, "p.toml:1:1",
             "unknown key 'paralelism' at the top level; did you mean 'parallelism'?");
  CHECK_DIAG(r, "p.toml:2:1",
             "unknown key 'zzz' at the top level; valid keys: name, parallelism, max_parallelism, "
             "buffer_timeout, batch_size, projection, combine, slot_sharing, checkpoint, restart, cluster, metrics, "
             "autoscale, sources, operators, sinks, test");
}

TEST_CASE("checkpoint, restart and metrics tables are checked", "[config]") {
  auto r = load(valid_head + R"toml([checkpoint]
interval = "5 sec"
mode = "exactly_once"
retain = 0
intervall = "1s"
timeout = 30
[restart]
strategy = "always"
max_attempts = "3"
[metrics]
listen = 9250
)toml");
  CHECK_DIAG(r, "p.toml:13:12", "bad duration '5 sec': use a number and a unit: ms, s, m, h, d");
  CHECK_DIAG(r, "p.toml:14:8",
             "'checkpoint.mode' must be one of exactly-once, at-least-once; got 'exactly_once'");
  CHECK_DIAG(r, "p.toml:15:10", "'checkpoint.retain' must be at least 1, got 0");
  CHECK_DIAG(r, "p.toml:16:1", "unknown key 'intervall' in [checkpoint]; did you mean 'interval'?");
  CHECK_DIAG(r, "p.toml:17:11", "'checkpoint.timeout' must be a duration");
  CHECK_DIAG(r, "p.toml:19:12",
             "'restart.strategy' must be one of none, fixed, exponential; got 'always'");
  CHECK_DIAG(r, "p.toml:20:16", "'restart.max_attempts' must be an integer, got string");
  CHECK_DIAG(r, "p.toml:22:10", "'metrics.listen' must be a string, got integer");
  CHECK(r.diagnostics.size() == 8);
}

TEST_CASE("an [autoscale] table with every key is valid", "[config]") {
  auto r = load("max_parallelism = 16\n" + valid_head + R"toml([autoscale]
enabled = true
min_parallelism = 1
max_parallelism = 8
interval = "30s"
target_utilization = 0.7
cooldown = "60s"
)toml");
  INFO(all(r));
  CHECK(r.diagnostics.empty());
  r = load(valid_head + "[autoscale]\ntarget_utilization = 1\nmax_parallelism = 128\n");
  INFO(all(r));
  CHECK(r.diagnostics.empty());
}

TEST_CASE("[autoscale] bounds are checked at their position", "[config]") {
  auto r = load("max_parallelism = 16\n" + valid_head + R"toml([autoscale]
min_parallelism = 6
max_parallelism = 4
target_utilization = 1.5
interval = "0s"
cooldown = 0
enabled = "yes"
)toml");
  CHECK_DIAG(r, "p.toml:14:19", "'autoscale.min_parallelism' (6) is above 'autoscale.max_parallelism' (4)");
  CHECK_DIAG(r, "p.toml:16:22",
             "'autoscale.target_utilization' must be above 0 and at most 1 (the busy fraction to "
             "size for, like 0.7), got 1.5");
  CHECK_DIAG(r, "p.toml:17:12", "'autoscale.interval' must be a positive duration, like \"30s\"; got '0s'");
  CHECK_DIAG(r, "p.toml:18:12", "'autoscale.cooldown' must be a positive duration, like \"30s\"; got 0");
  CHECK_DIAG(r, "p.toml:19:11", "'autoscale.enabled' must be a boolean, got string");
  CHECK(r.diagnostics.size() == 5);

  r = load("max_parallelism = 16\n" + valid_head + R"toml([autoscale]
max_parallelism = 32
min_parallelism = 0
target_utilization = 0
interval = "-5s"
mode = "ds2"
)toml");
  CHECK_DIAG(r, "p.toml:14:19",
             "'autoscale.max_parallelism' (32) is above the job's max_parallelism (16): rescale "
             "cannot go past the number of key groups");
  CHECK_DIAG(r, "p.toml:15:19", "'autoscale.min_parallelism' must be at least 1, got 0");
  CHECK_DIAG(r, "p.toml:16:22", "'autoscale.target_utilization' must be above 0 and at most 1");
  CHECK_DIAG(r, "p.toml:17:12", "bad duration '-5s'");
  CHECK_DIAG(r, "p.toml:18:1", "unknown key 'mode' in [autoscale]");
  CHECK(r.diagnostics.size() == 5);

  // Without its own max, the autoscaler's bound is the job's max_parallelism.
  r = load("max_parallelism = 4\n" + valid_head + "[autoscale]\nmin_parallelism = 5\n");
  CHECK_DIAG(r, "p.toml:14:19", "'autoscale.min_parallelism' (5) is above the job's max_parallelism (4)");
  CHECK(r.diagnostics.size() == 1);

  // --set overrides are checked like the file, at their own position.
  r = load(valid_head, {"autoscale.target_utilization=0"});
  CHECK_DIAG(r, "<--set>:1:30", "'autoscale.target_utilization' must be above 0");
}

TEST_CASE("a checkpoint interval of 0 turns checkpoints off and is valid", "[config]") {
  auto r = load(valid_head + "[checkpoint]\ninterval = 0\n");
  CHECK(r.diagnostics.empty());
  r = load(valid_head + "[checkpoint]\ninterval = \"0\"\n");
  CHECK(r.diagnostics.empty());
}

TEST_CASE("cluster hosts and launcher are checked", "[config]") {
  auto r = load(valid_head + R"toml([cluster]
hosts = ["a", 5, { host = "b", slot = 2 }, { slots = 0 }, ""]
launcher = "agent"
)toml");
  CHECK_DIAG(r, "p.toml:13:15", "'cluster.hosts[1]' must be a string or a table like");
  CHECK_DIAG(r, "p.toml:13:32", "unknown key 'slot' in [cluster.hosts[2]]; did you mean 'slots'?");
  CHECK_DIAG(r, "p.toml:13:44", "[cluster.hosts[3]] needs 'host'");
  CHECK_DIAG(r, "p.toml:13:54", "'cluster.hosts[3].slots' must be at least 1, got 0");
  CHECK_DIAG(r, "p.toml:13:59", "'cluster.hosts[4]' must not be empty");
  CHECK_DIAG(r, "p.toml:14:12", "launcher = \"agent\" is not supported now");
}

TEST_CASE("an unknown key in a node suggests the closest key", "[config]") {
  auto r = load(R"toml(name = "x"
[sources.clicks]
type = "file"
path = "clicks.jsonl"
[operators.ok]
type = "filter"
inputs = ["clicks"]
wher = "status == 200"
[sinks.out]
type = "stdout"
inputs = ["ok"]
colour = "red"
)toml");
  CHECK_DIAG(r, "p.toml:8:1", "unknown key 'wher' in operator 'ok'; did you mean 'where'?");
  CHECK_DIAG(r, "p.toml:5:1", "operator 'ok' (filter) needs 'where'");
  CHECK_DIAG(r, "p.toml:12:1",
             "unknown key 'colour' in sink 'out'; valid keys: type, inputs, parallelism, "
             "partition, on_error, dead_letter, format");
  CHECK(r.diagnostics.size() == 3);
}

TEST_CASE("nested tables of a schema are checked key by key", "[config]") {
  auto r = load(valid_head + R"toml([operators.w]
type = "window"
inputs = ["ok"]
window = { knd = "tumbling", size = "1 minute" }
)toml");
  CHECK_DIAG(r, "p.toml:15:12",
             "unknown key 'knd' in 'window' of operator 'w'; did you mean 'kind'?");
  CHECK_DIAG(r, "p.toml:15:10", "'window' of operator 'w' needs 'kind'");
  CHECK_DIAG(r, "p.toml:15:37", "bad duration '1 minute'");
}

TEST_CASE("node types: required, known to the role, suggested", "[config]") {
  auto r = load(R"toml(name = "x"
[sources.clicks]
path = "clicks.jsonl"
[operators.ok]
type = "filtr"
inputs = ["clicks"]
[sinks.out]
type = "filter"
inputs = ["ok"]
)toml");
  CHECK_DIAG(r, "p.toml:2:1", "source 'clicks' needs 'type'; valid types: file, generator, stdin");
  CHECK_DIAG(r, "p.toml:5:8",
             "unknown operator type 'filtr' in operator 'ok'; did you mean 'filter'? valid types: "
             "filter, map, window, dedup");
  CHECK_DIAG(
      r, "p.toml:8:8",
      "unknown sink type 'filter' in sink 'out'; did you mean 'file'? valid types: stdout, file");
  // With the type unknown, the other keys are not reported as unknown.
  CHECK(r.diagnostics.size() == 3);
}

TEST_CASE("a node must be a table", "[config]") {
  auto r = load(valid_head + "[operators]\nbad = 3\n");
  CHECK_DIAG(r, "p.toml:13:7", "operator 'bad' must be a table, got integer");
  r = load("sources = [\"a\"]\n" + valid_head.substr(valid_head.find("[operators")));
  CHECK_DIAG(r, "p.toml:1:11", "'sources' must be a table, got array");
}

TEST_CASE("inputs: required for operators and sinks, forbidden for sources", "[config]") {
  auto r = load(R"toml(name = "x"
[sources.clicks]
type = "file"
path = "c"
inputs = ["x"]
[operators.ok]
type = "filter"
where = "true"
[sinks.out]
type = "stdout"
inputs = []
[sinks.f]
type = "file"
path = "p"
inputs = ["clicks", "clicks", 3]
)toml");
  CHECK_DIAG(r, "p.toml:5:1", "source 'clicks' (file) takes no inputs");
  CHECK_DIAG(r, "p.toml:6:1", "operator 'ok' (filter) needs 'inputs'");
  CHECK_DIAG(r, "p.toml:11:10", "'inputs' of sink 'out' must name at least one node");
  CHECK_DIAG(r, "p.toml:15:21", "input 'clicks' of sink 'f' is listed twice");
  CHECK_DIAG(r, "p.toml:15:31", "'inputs[2]' must be a string, got integer");
  CHECK(r.diagnostics.size() == 5);
}

TEST_CASE("enum, duration, size, float and bool values of a node", "[config]") {
  auto r = load(valid_head + R"toml([sources.more]
type = "file"
path = "m"
format = "jsn"
[sources.gen]
type = "generator"
rate = 2.5
interval = "5 sec"
[operators.d]
type = "dedup"
inputs = ["more", "gen"]
within = "10m"
memory = "64 KiB"
exact = "yes"
[operators.d2]
type = "dedup"
inputs = ["d"]
memory = 1048576
)toml");
  CHECK_DIAG(r, "p.toml:15:10", "'format' must be one of json, csv, lines; got 'jsn'");
  CHECK_DIAG(r, "p.toml:19:12", "bad duration '5 sec': use a number and a unit: ms, s, m, h, d");
  CHECK_DIAG(r, "p.toml:24:10", "bad size '64 KiB'");
  CHECK_DIAG(r, "p.toml:25:9", "'exact' must be a boolean, got string");
  CHECK(r.diagnostics.size() == 4); // rate = 2.5 (Float), memory = 1048576 (Size) are fine
}

TEST_CASE("single-instance types always run with parallelism 1", "[config]") {
  auto r = load(valid_head + "parallelism = 2\n");
  CHECK_DIAG(r, "p.toml:12:15", "'parallelism' of sink 'out' (stdout) is always 1");
  r = load(valid_head + "parallelism = 1\n");
  CHECK(r.diagnostics.empty());
}

TEST_CASE("a file source with follow = true runs one subtask; without, the job's parallelism", "[config]") {
  const std::string head = "name = \"f\"\nparallelism = 3\n[sources.logs]\ntype = \"file\"\npath = \"*.log\"\n";
  const std::string tail = "[sinks.out]\ntype = \"stdout\"\ninputs = [\"logs\"]\n";
  // The file source's own schema, which names `follow` as the key that makes one subtask.
  SchemaCatalog with_file = catalog();
  with_file.sources[0] = streamctl::operators::file_source_schema();
  auto load = [&](const std::string& text) { return load_pipeline_text(text, "p.toml", "/base/dir", {}, with_file); };
  auto r = load(head + "follow = true\n" + tail);
  INFO(all(r));
  REQUIRE(r.spec);
  CHECK(r.spec->nodes[0].one_subtask);
  CHECK(r.spec->parallelism_of(r.spec->nodes[0]) == 1);
  r = load(head + "follow = false\n" + tail);
  REQUIRE(r.spec);
  CHECK(r.spec->parallelism_of(r.spec->nodes[0]) == 3);
  r = load(head + "follow = true\nparallelism = 2\n" + tail);
  CHECK_DIAG(r, "p.toml:7:15", "'parallelism' of source 'logs' (file) is always 1 with follow = true");
}

TEST_CASE("partition and on_error are enums; dead_letter goes with on_error", "[config]") {
  auto r = load(valid_head + R"toml(partition = "hash"
on_error = "ignore"
[sinks.f]
type = "file"
path = "p"
inputs = ["ok"]
on_error = "dead_letter"
[sinks.g]
type = "file"
path = "p"
inputs = ["ok"]
dead_letter = "dl.jsonl"
)toml");
  CHECK_DIAG(r, "p.toml:12:13",
             "'partition' must be one of forward, rebalance, broadcast; got 'hash'");
  CHECK_DIAG(r, "p.toml:13:12", "'on_error' must be one of drop, fail, dead_letter; got 'ignore'");
  CHECK_DIAG(r, "p.toml:18:12",
             "sink 'f' (file) needs 'dead_letter' (a file path) when on_error = \"dead_letter\"");
  CHECK_DIAG(r, "p.toml:23:1",
             "'dead_letter' is only used with on_error = \"dead_letter\"; sink 'g' has on_error = "
             "\"drop\"");
  CHECK(r.diagnostics.size() == 4);
}

TEST_CASE("node names: lowercase letters, digits, _ and -; unique across roles", "[config]") {
  auto r = load(valid_head + R"toml([operators.Bad_Name]
type = "filter"
inputs = ["ok"]
where = "true"
[sinks.clicks]
type = "file"
path = "p"
inputs = ["ok"]
)toml");
  CHECK_DIAG(r, "p.toml:12:12",
             "bad operator name 'Bad_Name': use lowercase letters, digits, '_' and '-'");
  CHECK_DIAG(r, "p.toml:16:8", "name 'clicks' is already used by source 'clicks' at line 2");
}

TEST_CASE("a dangling input suggests the closest node", "[config]") {
  auto r = load(R"toml(name = "x"
[sources.clicks]
type = "file"
path = "c"
[operators.ok]
type = "filter"
inputs = ["clickz"]
where = "true"
[sinks.out]
type = "stdout"
inputs = ["ok", "zzzz"]
)toml");
  CHECK_DIAG(r, "p.toml:7:11", "dangling input 'clickz' of operator 'ok'; did you mean 'clicks'?");
  CHECK_DIAG(r, "p.toml:11:17", "dangling input 'zzzz' of sink 'out'; valid inputs: clicks, ok");
  // The sink behind a dangling input is not also reported as unreachable.
  CHECK(r.diagnostics.size() == 2);
}

TEST_CASE("a sink is not an input", "[config]") {
  auto r = load(valid_head + "[sinks.second]\ntype = \"file\"\npath = \"p\"\ninputs = [\"out\"]\n");
  CHECK_DIAG(r, "p.toml:15:11", "input 'out' of sink 'second' is a sink; a sink has no output");
  CHECK(r.diagnostics.size() == 1);
}

TEST_CASE("a cycle is reported once, listing its nodes", "[config]") {
  auto r = load(R"toml(name = "x"
[sources.clicks]
type = "file"
path = "c"
[operators.a]
type = "filter"
inputs = ["clicks", "c"]
where = "true"
[operators.b]
type = "filter"
inputs = ["a"]
where = "true"
[operators.c]
type = "filter"
inputs = ["b"]
where = "true"
[operators.self]
type = "filter"
inputs = ["self"]
where = "true"
[sinks.out]
type = "stdout"
inputs = ["c"]
)toml");
  CHECK_DIAG(r, "p.toml:5:1", "cycle: a -> b -> c -> a");
  CHECK_DIAG(r, "p.toml:17:1", "cycle: self -> self");
  CHECK(r.diagnostics.size() == 2);
}

TEST_CASE("every sink is reachable from a source", "[config]") {
  auto r = load(R"toml(name = "x"
[sources.clicks]
type = "file"
path = "c"
[operators.a]
type = "filter"
inputs = ["b"]
where = "true"
[operators.b]
type = "filter"
inputs = ["a"]
where = "true"
[sinks.out]
type = "stdout"
inputs = ["clicks"]
[sinks.lost]
type = "file"
path = "p"
inputs = ["b"]
)toml");
  CHECK_DIAG(r, "p.toml:5:1", "cycle: a -> b -> a");
  CHECK_DIAG(r, "p.toml:16:1", "sink 'lost' is not reachable from any source");
  CHECK(r.diagnostics.size() == 2);
}

TEST_CASE("a pipeline needs a source and a sink", "[config]") {
  auto r = load("name = \"x\"\n");
  CHECK_DIAG(r, "p.toml:1:1", "the pipeline has no source");
  CHECK_DIAG(r, "p.toml:1:1", "the pipeline has no sink");
}

TEST_CASE("[[test]] tables name real sources and sinks", "[config]") {
  auto r = load(valid_head + R"toml([[test]]
name = "a"
input.clickz = ['{"a": 1}', ""]
expect.out = ['{}']
expect.ok = ['{}']
[[test]]
input.clicks = "not an array"
inputs.clicks = []
[[test]]
name = "a"
)toml");
  CHECK_DIAG(r, "p.toml:14:7",
             "unknown source 'clickz' in 'input' of test 'a'; did you mean 'clicks'?");
  CHECK_DIAG(r, "p.toml:14:29", "'input.clickz[1]' of test 'a' is empty");
  CHECK_DIAG(r, "p.toml:16:8", "unknown sink 'ok' in 'expect' of test 'a'; valid: out");
  CHECK_DIAG(r, "p.toml:17:1", "test #2 needs 'name'");
  CHECK_DIAG(r, "p.toml:18:16", "'input.clicks' must be an array of strings, got string");
  CHECK_DIAG(r, "p.toml:19:1", "unknown key 'inputs' in test #2; did you mean 'input'?");
  CHECK_DIAG(r, "p.toml:21:8", "test name 'a' is already used at line 13");
  CHECK(r.diagnostics.size() == 7);

  r = load(valid_head + "[test]\nname = \"t\"\n");
  CHECK_DIAG(r, "p.toml:12:1", "'test' must be an array of tables ([[test]]), got table");
}

TEST_CASE("several problems in one file are all reported, in file order", "[config]") {
  auto r = load(R"toml(name = "Bad"
parallelism = "two"
[sources.clicks]
type = "file"
format = "xml"
[operators.ok]
type = "filter"
inputs = ["clickz"]
where = "true"
colour = 1
[sinks.out]
type = "stdout"
inputs = ["ok"]
)toml");
  INFO(all(r));
  CHECK(has(r, "p.toml:1:8", "'name' must be"));
  CHECK(has(r, "p.toml:2:15", "'parallelism' must be an integer"));
  CHECK(has(r, "p.toml:3:1", "source 'clicks' (file) needs 'path'"));
  CHECK(has(r, "p.toml:5:10", "'format' must be one of json, csv, lines; got 'xml'"));
  CHECK(has(r, "p.toml:8:11", "dangling input 'clickz'"));
  CHECK(has(r, "p.toml:10:1", "unknown key 'colour' in operator 'ok'"));
  REQUIRE(r.diagnostics.size() == 6);
  for (std::size_t k = 1; k < r.diagnostics.size(); ++k)
    CHECK(r.diagnostics.items()[k - 1].where.line <= r.diagnostics.items()[k].where.line);
  CHECK_FALSE(r.spec);
}

TEST_CASE("overrides set integers, fall back to strings and create tables", "[config]") {
  auto r = load(valid_head,
                {"parallelism=4", "sources.clicks.path=other.jsonl", "checkpoint.interval=5s",
                 "sources.gen.type=\"generator\"", "operators.ok.where=\"a == 1\"",
                 "sources.clicks.watermark={max_delay=\"1s\"}"});
  INFO(all(r));
  REQUIRE(r.spec);
  CHECK(r.spec->parallelism == 4);
  const NodeSpec* clicks = r.spec->find("clicks");
  REQUIRE(clicks);
  CHECK(clicks->config["path"].value_or(std::string()) == "other.jsonl");
  CHECK(clicks->config["watermark"]["max_delay"].value_or(std::string()) == "1s");
  CHECK(r.spec->root["checkpoint"]["interval"].value_or(std::string()) == "5s");
  CHECK(r.spec->find("ok")->config["where"].value_or(std::string()) == "a == 1");
  // The new source comes after those of the file.
  REQUIRE(r.spec->nodes.size() == 4);
  CHECK(r.spec->nodes[1].name == "gen");
  CHECK(r.spec->nodes[1].type == "generator");
  // An overridden value points at its --set.
  auto path = clicks->config.get("path");
  REQUIRE(path);
  REQUIRE(path->source().path);
  CHECK(*path->source().path == "<--set>");
  CHECK(path->source().begin.line == 2);
}

TEST_CASE("overrides are validated like the file, at their own position", "[config]") {
  auto r = load(valid_head, {"name=ok", "parallelism=0", "operators.ok.wher=1"});
  CHECK_DIAG(r, "<--set>:2:13", "'parallelism' must be at least 1, got 0");
  CHECK_DIAG(r, "<--set>:3:14", "unknown key 'wher' in operator 'ok'; did you mean 'where'?");
  CHECK(r.diagnostics.size() == 2);
}

TEST_CASE("a bad override is a diagnostic of <--set>", "[config]") {
  auto r = load(valid_head, {"parallelism", "name.x=1", "a..b=1", "checkpoint.interval=5s"});
  CHECK_DIAG(r, "<--set>:1:1", "bad override 'parallelism': use KEY=VALUE");
  CHECK_DIAG(r, "<--set>:2:1", "bad override 'name.x=1': 'name' is a string, not a table");
  CHECK_DIAG(r, "<--set>:3:1", "bad override 'a..b=1'");
  CHECK(r.diagnostics.size() == 3);
  CHECK_FALSE(r.spec);
}

TEST_CASE("an override value that is not TOML is taken whole as a string", "[config]") {
  auto r =
      load(valid_head, {"operators.ok.where=status == 200 && x = \"q\"", "sources.clicks.path="});
  INFO(all(r));
  // Not a string that TOML can read: the text is the value; the expression then fails.
  CHECK(has(r, "<--set>:1:39", "bad expression in 'where'"));
  REQUIRE(r.diagnostics.size() == 1);
}

TEST_CASE("a bad expression is reported at the offending character", "[config]") {
  auto r = load(R"toml(name = "x"
[sources.clicks]
type = "file"
path = "c"
[operators.ok]
type = "filter"
inputs = ["clicks"]
where = "status = 200"
[operators.m]
type = "map"
inputs = ["ok"]
set = { a = 'x + 1', b = "\"é\" + (y = 2)", c = """
x +
  y = 1""" }
[sinks.out]
type = "stdout"
inputs = ["m"]
)toml");
  CHECK_DIAG(r, "p.toml:8:17", "bad expression in 'where': unexpected '='; use '==' to compare");
  CHECK_DIAG(r, "p.toml:12:38", "bad expression in 'set.b': unexpected '='");
  CHECK_DIAG(r, "p.toml:14:5", "bad expression in 'set.c': unexpected '='");
  CHECK(r.diagnostics.size() == 3);
}

TEST_CASE("load_pipeline reads the file and resolves paths against its directory", "[config]") {
  char dir_template[] = "/tmp/streamctl-config-test-XXXXXX";
  REQUIRE(mkdtemp(dir_template));
  std::filesystem::path dir = dir_template;
  std::filesystem::path file = dir / "p.toml";
  {
    std::ofstream out(file);
    out << valid_head << "on_error = \"dead_letter\"\ndead_letter = \"../dl/out.jsonl\"\n";
  }
  auto r = load_pipeline(file, {}, catalog());
  INFO(all(r));
  REQUIRE(r.spec);
  CHECK(r.spec->file == file);
  CHECK(r.spec->base_dir == dir);
  CHECK(r.spec->nodes[2].dead_letter == dir.parent_path() / "dl" / "out.jsonl");

  auto missing = load_pipeline(dir / "missing.toml", {}, catalog());
  CHECK_FALSE(missing.spec);
  REQUIRE(missing.diagnostics.size() == 1);
  CHECK(missing.diagnostics.items()[0].to_string().find(
            (dir / "missing.toml").string() + ":0:0: cannot read the pipeline file") == 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a late output name is unique like node names", "[config]") {
  auto r = load(valid_head + R"toml([operators.w]
type = "window"
inputs = ["ok"]
window = { kind = "tumbling" }
late_output = "clicks"
)toml");
  CHECK_DIAG(r, "p.toml:16:15", "name 'clicks' is already used by source 'clicks' at line 2");
  CHECK(r.diagnostics.size() == 1);
}

TEST_CASE("durations of a node are never negative", "[config]") {
  auto r =
      load(valid_head + "[operators.d]\ntype = \"dedup\"\ninputs = [\"ok\"]\nwithin = \"-5s\"\n");
  CHECK_DIAG(r, "p.toml:15:10", "bad duration '-5s'");
}

// Issue 7, finding 5: `validate /dev/zero` read without end (~330 MB/s of memory). The read is
// bounded, so a file or device larger than the limit ends at once with a message.
TEST_CASE("a pipeline file larger than the limit is refused before it is read whole", "[config][limits]") {
  char dir_template[] = "/tmp/streamctl-config-test-XXXXXX";
  REQUIRE(mkdtemp(dir_template));
  std::filesystem::path dir = dir_template;
  std::filesystem::path file = dir / "p.toml";
  {
    std::ofstream out(file);
    out << valid_head << std::string(200, '#') << "\n";
  }
  auto small = load_pipeline(file, {}, catalog(), 100);
  CHECK_FALSE(small.spec);
  REQUIRE(small.diagnostics.size() == 1);
  CHECK(small.diagnostics.items()[0].to_string() ==
        file.string() + ":0:0: the pipeline file is larger than 100 bytes, the limit for a pipeline file "
                        "(raise it with --max-pipeline-size BYTES)");
  auto enough = load_pipeline(file, {}, catalog(), 4096);
  INFO(all(enough));
  CHECK(enough.spec);
  CHECK(enough.text == valid_head + std::string(200, '#') + "\n");

  auto zero = load_pipeline("/dev/zero", {}, catalog(), std::size_t{1} << 20);
  REQUIRE(zero.diagnostics.size() == 1);
  CHECK_THAT(zero.diagnostics.items()[0].message, Catch::StartsWith("the pipeline file is larger than 1 MiB"));
  std::filesystem::remove_all(dir);
}

// Issue 7, finding 6: names become directory names; one too long for them validated, then
// `run` failed.
TEST_CASE("job and node names are at most 128 characters", "[config][limits]") {
  CHECK(load("name = \"" + std::string(128, 'a') + "\"" + valid_head.substr(valid_head.find('\n'))).spec);
  auto r = load("name = \"" + std::string(200, 'a') + "\"" + valid_head.substr(valid_head.find('\n')));
  CHECK_DIAG(r, "p.toml:1:8",
             "the job 'name' 'aaaaaaaaaaaaaaaaaaaaaaaa...' is 200 characters long, above the limit of 128 "
             "(it becomes a file name): shorten it");
  auto node = load(valid_head + "[operators." + std::string(129, 'o') +
                   "]\ntype = \"filter\"\ninputs = [\"ok\"]\nwhere = \"true\"\n");
  CHECK_DIAG(node, "p.toml:12:12", "operator name 'oooooooooooooooooooooooo...' is 129 characters long");
}
