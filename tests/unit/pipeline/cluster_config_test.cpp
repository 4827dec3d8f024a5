// [cluster], node `host` / `shared` and [checkpoint] storage (SPEC §9, issue 8): every problem
// reported at its place, and ClusterSpec read from a valid file. The node types are the real
// ones (operators/registry.cpp), so where stdin, stdout and file nodes may run is theirs.
#include <catch2/catch.hpp>

#include "operators/registry.hpp"
#include "pipeline/runtime/job_loader.hpp"
#include "pipeline/spec/cluster_spec.hpp"
#include "pipeline/spec/config_loader.hpp"

using namespace streamctl;
using namespace streamctl::pipeline;

namespace {

LoadResult load(const std::string& text) {
  operators::Registry registry;
  operators::register_builtin_types(registry);
  return load_pipeline_text(text, "p.toml", "/base", {}, runtime::catalog_of(registry));
}

std::string all(const LoadResult& r) {
  std::string out;
  for (const auto& d : r.diagnostics)
    out += d.to_string() + "\n";
  return out;
}

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

// Lines 1-13; a test appends its [cluster] from line 14.
const std::string head = R"toml(name = "c"
[sources.in]
type = "stdin"
[sources.logs]
type = "file"
path = "logs.jsonl"
[operators.ok]
type = "filter"
inputs = ["in", "logs"]
where = "true"
[sinks.out]
type = "stdout"
inputs = ["ok"]
)toml";

} // namespace

TEST_CASE("the contract's [cluster] is valid and read back", "[cluster]") {
  auto r = load(head + R"toml([cluster]
launcher = "ssh"
hosts = ["worker1", "ops@worker2", { host = "worker3", slots = 4 }]
ssh_options = ["-F", "ops/ssh_config"]
binary = "/usr/bin/streamctl"
ship_binary = false
encrypt = false
[checkpoint]
storage = "shared"
)toml");
  INFO(all(r));
  REQUIRE(r.spec);
  ClusterSpec c = cluster_of(*r.spec);
  CHECK(c.launcher == LauncherKind::Ssh);
  REQUIRE(c.hosts.size() == 3);
  CHECK(c.hosts[0].name == "worker1");
  CHECK(c.hosts[0].user.empty());
  CHECK(c.hosts[0].address == "worker1");
  CHECK_FALSE(c.hosts[0].slots);
  CHECK(c.hosts[1].name == "ops@worker2");
  CHECK(c.hosts[1].user == "ops");
  CHECK(c.hosts[1].address == "worker2");
  CHECK(c.hosts[2].name == "worker3");
  CHECK(c.hosts[2].slots == 4);
  CHECK(c.ssh_options == std::vector<std::string>{"-F", "ops/ssh_config"});
  CHECK(c.binary == "/usr/bin/streamctl");
  CHECK_FALSE(c.ship_binary);
  CHECK_FALSE(c.encrypt);
  CHECK(c.storage == CheckpointStorage::Shared);
}

TEST_CASE("cluster defaults: local without hosts, ssh and coordinator storage with them",
          "[cluster]") {
  auto r = load(head);
  REQUIRE(r.spec);
  ClusterSpec c = cluster_of(*r.spec);
  CHECK(c.launcher == LauncherKind::Local);
  CHECK(c.hosts.empty());
  CHECK(c.binary.empty());
  CHECK(c.encrypt);
  CHECK_FALSE(c.ship_binary);
  CHECK(c.storage == CheckpointStorage::Shared);

  r = load(head + "[cluster]\nhosts = [\"a\"]\n");
  REQUIRE(r.spec);
  c = cluster_of(*r.spec);
  CHECK(c.launcher == LauncherKind::Ssh);
  CHECK(c.storage == CheckpointStorage::Coordinator);
  CHECK(c.encrypt);

  r = load(head + "[cluster]\nlauncher = \"slurm\"\n");
  REQUIRE(r.spec);
  c = cluster_of(*r.spec);
  CHECK(c.launcher == LauncherKind::Slurm);
  CHECK(c.hosts.empty());
  CHECK(c.storage == CheckpointStorage::Coordinator);

  r = load(head + "[cluster]\nlauncher = \"local\"\n[checkpoint]\nstorage = \"coordinator\"\n");
  REQUIRE(r.spec);
  CHECK(cluster_of(*r.spec).storage == CheckpointStorage::Coordinator);
}

TEST_CASE("an unknown launcher is refused with the valid ones", "[cluster]") {
  auto r = load(head + "[cluster]\nlauncher = \"sssh\"\n");
  CHECK_DIAG(r, "p.toml:15:12", "'cluster.launcher' must be one of local, ssh, slurm; got 'sssh'");
  CHECK(r.diagnostics.size() == 1);
  r = load(head + "[cluster]\nlauncher = 3\n");
  CHECK_DIAG(r, "p.toml:15:12", "'cluster.launcher' must be a string, got integer");
}

TEST_CASE("the agent launcher and 'agents' are not supported now", "[cluster]") {
  auto r = load(head + "[cluster]\nlauncher = \"agent\"\nagents = [\"h1:7000\"]\n");
  CHECK_DIAG(r, "p.toml:15:12",
             "launcher = \"agent\" is not supported now: use \"ssh\" (hosts you can ssh into) or "
             "\"slurm\" (inside a Slurm allocation)");
  CHECK_DIAG(r, "p.toml:16:1", "'agents' is not supported now");
  CHECK(r.diagnostics.size() == 2);
}

TEST_CASE("launcher ssh needs hosts; local and slurm take none", "[cluster]") {
  auto r = load(head + "[cluster]\nlauncher = \"ssh\"\n");
  CHECK_DIAG(r, "p.toml:15:12", "launcher = \"ssh\" needs 'hosts'");
  r = load(head + "[cluster]\nlauncher = \"ssh\"\nhosts = []\n");
  CHECK_DIAG(r, "p.toml:15:12", "launcher = \"ssh\" needs 'hosts'");
  r = load(head + "[cluster]\nlauncher = \"local\"\nhosts = [\"a\"]\n");
  CHECK_DIAG(r, "p.toml:16:9",
             "'hosts' is not used with launcher = \"local\" (every worker runs on this host: "
             "remove 'hosts', or use launcher = \"ssh\")");
  CHECK(r.diagnostics.size() == 1);
  r = load(head + "[cluster]\nlauncher = \"slurm\"\nhosts = [\"a\"]\n");
  CHECK_DIAG(r, "p.toml:16:9",
             "'hosts' is not used with launcher = \"slurm\" (workers run on the "
             "nodes of the Slurm allocation");
  // An empty list with the default launcher is no hosts at all: local.
  r = load(head + "[cluster]\nhosts = []\n");
  REQUIRE(r.spec);
  CHECK(cluster_of(*r.spec).launcher == LauncherKind::Local);
}

TEST_CASE("host entries: types, slots at least 1, names ssh can take", "[cluster]") {
  auto r = load(head + R"toml([cluster]
hosts = ["a", 5, { host = "b", slots = 0 }, { slots = 2 }, "", "-oProxyCommand=x", "c d", "@e", "f@", { host = "g", slots = "4" }]
)toml");
  CHECK_DIAG(r, "p.toml:15:15",
             "'cluster.hosts[1]' must be a string or a table like { host = \"h\", slots = 4 }, got "
             "integer");
  CHECK_DIAG(r, "p.toml:15:40", "'cluster.hosts[2].slots' must be at least 1, got 0");
  CHECK_DIAG(r, "p.toml:15:45", "[cluster.hosts[3]] needs 'host'");
  CHECK_DIAG(r, "p.toml:15:60", "'cluster.hosts[4]' must not be empty");
  CHECK_DIAG(r, "p.toml:15:64", "'cluster.hosts[5]' must not start with '-'");
  CHECK_DIAG(r, "p.toml:15:84", "'cluster.hosts[6]' must not hold blanks");
  CHECK_DIAG(r, "p.toml:15:91", "'cluster.hosts[7]' must be HOST or USER@HOST, got '@e'");
  CHECK_DIAG(r, "p.toml:15:97", "'cluster.hosts[8]' must be HOST or USER@HOST, got 'f@'");
  CHECK_DIAG(r, "p.toml:15:125", "'cluster.hosts[9].slots' must be an integer, got string");
  CHECK(r.diagnostics.size() == 9);
}

TEST_CASE("a host listed twice is refused, by its address", "[cluster]") {
  auto r = load(head + R"toml([cluster]
hosts = ["w1", "w2",
  "ops@w2",
  { host = "w1", slots = 3 }]
)toml");
  CHECK_DIAG(r, "p.toml:16:3",
             "host 'w2' is listed twice in [cluster] hosts (first as 'w2' at line 15): list each "
             "host once, with { host = \"w2\", slots = N } for more workers on it");
  CHECK_DIAG(r, "p.toml:17:12",
             "host 'w1' is listed twice in [cluster] hosts (first as 'w1' at line 15)");
  CHECK(r.diagnostics.size() == 2);
}

TEST_CASE("binary, ship_binary, encrypt, ssh_options and unknown keys", "[cluster]") {
  auto r = load(head + R"toml([cluster]
hosts = ["a"]
binary = "/opt/streamctl"
ship_binary = true
encrypt = "no"
ssh_options = "-F x"
hostz = 1
)toml");
  CHECK_DIAG(r, "p.toml:16:10", "'binary' and ship_binary = true contradict each other");
  CHECK_DIAG(r, "p.toml:18:11", "'cluster.encrypt' must be a boolean, got string");
  CHECK_DIAG(r, "p.toml:19:15", "'cluster.ssh_options' must be an array of strings, got string");
  CHECK_DIAG(r, "p.toml:20:1", "unknown key 'hostz' in [cluster]; did you mean 'hosts'?");
  CHECK(r.diagnostics.size() == 4);

  r = load(head + "[cluster]\nbinary = \"\"\nzzz = 1\n");
  CHECK_DIAG(r, "p.toml:15:10", "'cluster.binary' must not be empty");
  // 'agents' is not offered as a valid key.
  CHECK_DIAG(r, "p.toml:16:1",
             "unknown key 'zzz' in [cluster]; valid keys: launcher, hosts, ssh_options, binary, "
             "ship_binary, encrypt, nodes, slurm_options");
}

TEST_CASE("nodes and slurm_options shape the allocation of the slurm launcher", "[cluster]") {
  auto r = load(head + "[cluster]\nlauncher = \"slurm\"\nnodes = 3\n"
                       "slurm_options = [\"--partition=debug\", \"-t10\"]\n");
  REQUIRE(r.spec);
  ClusterSpec c = cluster_of(*r.spec);
  CHECK(c.nodes == 3);
  CHECK(c.slurm_options == std::vector<std::string>{"--partition=debug", "-t10"});
  r = load(head + "[cluster]\nlauncher = \"slurm\"\n");
  REQUIRE(r.spec);
  CHECK_FALSE(cluster_of(*r.spec).nodes);
  CHECK(cluster_of(*r.spec).slurm_options.empty());

  r = load(head + R"toml([cluster]
launcher = "slurm"
nodes = 0
slurm_options = ["partition=x", "--", "-p debug", 4]
)toml");
  CHECK_DIAG(r, "p.toml:16:9", "'cluster.nodes' must be at least 1, got 0");
  CHECK_DIAG(r, "p.toml:17:18",
             "'cluster.slurm_options[0]' must be a salloc option like \"--partition=debug\" or "
             "\"-pdebug\", got 'partition=x'");
  CHECK_DIAG(r, "p.toml:17:33", "'cluster.slurm_options[1]' must be a salloc option");
  CHECK_DIAG(r, "p.toml:17:51", "'cluster.slurm_options[3]' must be a string, got integer");
  CHECK(r.diagnostics.size() == 4);
  r = load(head + "[cluster]\nlauncher = \"slurm\"\nnodes = \"3\"\nslurm_options = \"-pdebug\"\n");
  CHECK_DIAG(r, "p.toml:16:9", "'cluster.nodes' must be an integer, got string");
  CHECK_DIAG(r, "p.toml:17:17", "'cluster.slurm_options' must be an array of strings, got string");
  // Ignored by the other launchers, so that `run --launcher local` takes a Slurm pipeline.
  r = load(head + "[cluster]\nlauncher = \"local\"\nnodes = 2\n");
  CHECK(r.spec);
}

TEST_CASE("checkpoint storage is coordinator or shared", "[cluster]") {
  auto r = load(head + "[checkpoint]\nstorage = \"nfs\"\n");
  CHECK_DIAG(r, "p.toml:15:11",
             "'checkpoint.storage' must be one of coordinator, shared; got 'nfs'");
}

TEST_CASE("a node pins itself to a host of [cluster], as written or by address", "[cluster]") {
  std::string text = R"toml(name = "c"
[sources.logs]
type = "file"
path = "logs.jsonl"
host = "w2"
[operators.ok]
type = "filter"
inputs = ["logs"]
where = "true"
host = "ops@w2"
[sinks.out]
type = "file"
path = "out"
inputs = ["ok"]
host = "w1"
[cluster]
hosts = ["w1", "ops@w2"]
)toml";
  auto r = load(text);
  INFO(all(r));
  REQUIRE(r.spec);
  CHECK(r.spec->find("logs")->host == "w2");
  CHECK(r.spec->find("ok")->host == "ops@w2");
  CHECK(r.spec->find("out")->host == "w1");
}

TEST_CASE("a pin to an unknown host is refused with the hosts there are", "[cluster]") {
  std::string nodes = R"toml(name = "c"
[sources.g]
type = "generator"
host = "w3"
[operators.ok]
type = "filter"
inputs = ["g"]
where = "true"
host = "worker"
[sinks.out]
type = "stdout"
inputs = ["ok"]
)toml";
  auto r = load(nodes + "[cluster]\nhosts = [\"w1\", \"ops@w2\"]\n");
  CHECK_DIAG(r, "p.toml:4:8",
             "unknown host 'w3' in 'host' of source 'g'; did you mean 'w1'? valid: w1, ops@w2 (an "
             "entry of [cluster] hosts as written, or its part after '@')");
  CHECK_DIAG(r, "p.toml:9:8",
             "unknown host 'worker' in 'host' of operator 'ok'; valid: w1, ops@w2");
  CHECK(r.diagnostics.size() == 2);

  r = load(nodes);
  CHECK_DIAG(r, "p.toml:4:8",
             "source 'g' pins itself to host 'w3', but [cluster] lists no hosts: every worker "
             "runs on this host; remove 'host', or list the hosts in [cluster] hosts");
  CHECK(r.diagnostics.size() == 2);

  // Under slurm the hosts are the allocation's nodes: pins are checked when the job starts.
  r = load(nodes + "[cluster]\nlauncher = \"slurm\"\n");
  CHECK(r.diagnostics.empty());
}

TEST_CASE("stdin and stdout run on the coordinator's host: no 'host' on them", "[cluster]") {
  auto r = load(R"toml(name = "c"
[sources.in]
type = "stdin"
host = "w1"
[sinks.out]
type = "stdout"
inputs = ["in"]
host = "w1"
[cluster]
hosts = ["w1"]
)toml");
  CHECK_DIAG(r, "p.toml:4:8",
             "source 'in' (stdin) reads the terminal of `streamctl run`, so it runs on the "
             "coordinator's host: remove 'host'");
  CHECK_DIAG(r, "p.toml:8:8",
             "sink 'out' (stdout) writes the terminal of `streamctl run`, so it runs on the "
             "coordinator's host: remove 'host'");
  CHECK(r.diagnostics.size() == 2);
}

TEST_CASE("'shared' is for file sources and sinks only, and a boolean", "[cluster]") {
  auto r = load(R"toml(name = "c"
[sources.in]
type = "stdin"
shared = true
[sources.g]
type = "generator"
shared = true
[operators.ok]
type = "filter"
inputs = ["in", "g"]
where = "true"
shared = false
[sinks.out]
type = "file"
path = "out"
inputs = ["ok"]
shared = "yes"
[sinks.err]
type = "stdout"
inputs = ["ok"]
host = ""
)toml");
  CHECK_DIAG(r, "p.toml:4:10",
             "'shared' is only for nodes that read or write files (file sources and sinks); "
             "source 'in' (stdin) has no path");
  CHECK_DIAG(r, "p.toml:7:10", "source 'g' (generator) has no path");
  CHECK_DIAG(r, "p.toml:12:10", "operator 'ok' (filter) has no path");
  CHECK_DIAG(r, "p.toml:17:10", "'shared' must be a boolean, got string");
  CHECK_DIAG(r, "p.toml:21:8", "'host' of sink 'err' must not be empty");
  CHECK(r.diagnostics.size() == 5);

  r = load(R"toml(name = "c"
[sources.logs]
type = "file"
path = "logs.jsonl"
shared = true
[sinks.out]
type = "file"
path = "out"
inputs = ["logs"]
[cluster]
hosts = ["w1"]
)toml");
  INFO(all(r));
  REQUIRE(r.spec);
  CHECK(r.spec->find("logs")->shared);
  CHECK(r.spec->find("logs")->reach == NodeReach::Path);
  CHECK_FALSE(r.spec->find("out")->shared);
}

TEST_CASE("valid keys of a node list host and shared only where they apply", "[cluster]") {
  auto r = load(R"toml(name = "c"
[sources.g]
type = "generator"
hots = "w1"
[sinks.out]
type = "file"
path = "out"
inputs = ["g"]
zzz = 1
)toml");
  CHECK_DIAG(r, "p.toml:4:1", "unknown key 'hots' in source 'g'; did you mean 'host'?");
  CHECK_DIAG(r, "p.toml:9:1",
             "valid keys: type, inputs, parallelism, partition, on_error, "
             "dead_letter, host, shared, ");
}

TEST_CASE("every cluster problem is reported at once", "[cluster]") {
  auto r = load(R"toml(name = "c"
[sources.in]
type = "stdin"
host = "w1"
[operators.ok]
type = "filter"
inputs = ["in"]
where = "true"
shared = true
host = "w9"
[sinks.out]
type = "stdout"
inputs = ["ok"]
[cluster]
launcher = "ssh"
hosts = ["w1", "w1", { host = "w2", slots = 0 }]
binary = ""
[checkpoint]
storage = "everywhere"
)toml");
  INFO(all(r));
  CHECK(has(r, "p.toml:4:8", "remove 'host'"));
  CHECK(has(r, "p.toml:9:10", "'shared' is only for"));
  CHECK(has(r, "p.toml:16:16", "host 'w1' is listed twice"));
  CHECK(has(r, "p.toml:16:45", "'cluster.hosts[2].slots' must be at least 1"));
  CHECK(has(r, "p.toml:17:10", "'cluster.binary' must not be empty"));
  CHECK(has(r, "p.toml:19:11", "'checkpoint.storage' must be one of"));
  CHECK(has(r, "p.toml:10:8", "unknown host 'w9'"));
  CHECK(r.diagnostics.size() == 7);
}
