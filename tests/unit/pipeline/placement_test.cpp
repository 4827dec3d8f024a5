// Placement of a plan's tasks on hosts (SPEC §9, issue 8): spreading, pins, the nodes that stay
// on the coordinator's host, the not-enough-slots message, determinism, and random shapes.
#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <set>

#include "operators/registry.hpp"
#include "pipeline/runtime/job_loader.hpp"
#include "pipeline/spec/config_loader.hpp"
#include "pipeline/spec/placement.hpp"
#include "pipeline/spec/placement_preview.hpp"

using namespace streamctl;
using namespace streamctl::pipeline;

namespace {

struct Job {
  PipelineSpec spec;
  PhysicalPlan plan;
};

Job load(const std::string& text) {
  operators::Registry registry;
  operators::register_builtin_types(registry);
  auto r = load_pipeline_text(text, "p.toml", "/base", {}, runtime::catalog_of(registry));
  std::string problems;
  for (const auto& d : r.diagnostics)
    problems += d.to_string() + "\n";
  INFO(problems);
  REQUIRE(r.spec);
  Job job{std::move(*r.spec), {}};
  job.plan = plan_job(job.spec);
  return job;
}

std::vector<std::string> hosts_of_chain(const Job& job, const Placement& p, int chain) {
  std::vector<std::string> out;
  for (const auto& t : job.plan.tasks)
    if (t.chain == chain) out.push_back(p.host_of(t.id));
  return out;
}

std::map<std::string, int> count_per_host(const Placement& p) {
  std::map<std::string, int> out;
  for (const auto& h : p.task_hosts)
    ++out[h];
  return out;
}

// [cluster] listing `hosts`, for pipelines whose nodes pin themselves (validation checks pins).
std::string cluster_of_hosts(const std::vector<PlacementHost>& hosts) {
  std::string out = "[cluster]\nhosts = [";
  for (std::size_t k = 0; k < hosts.size(); ++k)
    out += (k ? ", \"" : "\"") + hosts[k].name + "\"";
  return out + "]\n";
}

const std::vector<PlacementHost> three_by_two = {{"w1", 2}, {"ops@w2", 2}, {"w3", 2}};

// A generator, a keyed reduce, a shared file sink; chains: g (0), per_user -> out (1).
std::string keyed_job(int parallelism, const std::string& extra_reduce_keys = "") {
  return "name = \"k\"\nparallelism = " + std::to_string(parallelism) + R"toml(
[sources.g]
type = "generator"
[operators.per_user]
type = "reduce"
inputs = ["g"]
key = ["user"]
aggregates = { n = "count()" }
)toml" + extra_reduce_keys +
         R"toml(
[sinks.out]
type = "file"
path = "out"
inputs = ["per_user"]
shared = true
)toml";
}

} // namespace

TEST_CASE("parallelism 6 over 3 hosts of 2 slots: 2 tasks each, subtasks rotating", "[placement]") {
  Job job = load(R"toml(name = "s"
parallelism = 6
[sources.g]
type = "generator"
[operators.ok]
type = "filter"
inputs = ["g"]
where = "true"
[sinks.out]
type = "file"
path = "out"
inputs = ["ok"]
shared = true
)toml");
  REQUIRE(job.plan.chains.size() == 1);
  auto p = place(job.spec, job.plan, three_by_two);
  INFO((p ? "" : p.error()));
  REQUIRE(p);
  CHECK(hosts_of_chain(job, *p, 0) ==
        std::vector<std::string>{"w1", "ops@w2", "w3", "w1", "ops@w2", "w3"});
  CHECK(p->chains[0].site == ChainSite::Spread);
  CHECK(count_per_host(*p) == std::map<std::string, int>{{"w1", 2}, {"ops@w2", 2}, {"w3", 2}});
}

TEST_CASE("each operator's subtasks spread first, then by free slots", "[placement]") {
  Job job = load(keyed_job(3));
  REQUIRE(job.plan.chains.size() == 2);
  // g: w1 (most free), w2, w3 (equal, listed first wins); then per_user -> out on w1 alone.
  auto p = place(job.spec, job.plan, {{"w1", 4}, {"w2", 1}, {"w3", 1}});
  REQUIRE(p);
  CHECK(hosts_of_chain(job, *p, 0) == std::vector<std::string>{"w1", "w2", "w3"});
  CHECK(hosts_of_chain(job, *p, 1) == std::vector<std::string>{"w1", "w1", "w1"});

  // Single-subtask chains go to the host with the most free slots: one each here.
  job = load(R"toml(name = "u"
[sources.g1]
type = "generator"
[sources.g2]
type = "generator"
[sinks.out]
type = "file"
path = "out"
shared = true
inputs = ["g1", "g2"]
)toml");
  REQUIRE(job.plan.chains.size() == 3);
  p = place(job.spec, job.plan, three_by_two);
  REQUIRE(p);
  CHECK(p->task_hosts == std::vector<std::string>{"w1", "ops@w2", "w3"});
}

TEST_CASE("stdin, stdout and unshared file nodes keep their chains on the coordinator's host",
          "[placement]") {
  Job job = load(R"toml(name = "c"
parallelism = 2
[sources.in]
type = "stdin"
[sources.logs]
type = "file"
path = "logs.jsonl"
[sources.shared_logs]
type = "file"
path = "/nfs/logs.jsonl"
shared = true
[operators.ok]
type = "filter"
inputs = ["in", "logs", "shared_logs"]
where = "true"
[sinks.out]
type = "stdout"
inputs = ["ok"]
[sinks.archive]
type = "file"
path = "archive"
inputs = ["ok"]
)toml");
  // Chains: in, logs, shared_logs, ok, out, archive (nothing fuses: ok has three inputs and two
  // consumers).
  REQUIRE(job.plan.chains.size() == 6);
  auto p = place(job.spec, job.plan, {{"w1", 2}, {"w2", 2}});
  INFO((p ? "" : p.error()));
  REQUIRE(p);
  auto chain_of = [&](const std::string& node) {
    for (const auto& c : job.plan.chains)
      if (job.spec.nodes[c.nodes[0]].name == node) return c.id;
    FAIL("no chain starts with " << node);
    return -1;
  };
  auto site = [&](const std::string& node) {
    return p->chains[static_cast<std::size_t>(chain_of(node))];
  };
  CHECK(site("in").site == ChainSite::Coordinator);
  CHECK(site("in").reason == "stdin source 'in' reads the coordinator's terminal");
  CHECK(site("out").reason == "stdout sink 'out' writes the coordinator's terminal");
  CHECK(site("logs").reason ==
        "file source 'logs' reads a path on the coordinator's host (it is not shared = true)");
  CHECK(site("archive").reason ==
        "file sink 'archive' writes a path on the coordinator's host (it is not shared = true)");
  CHECK(hosts_of_chain(job, *p, chain_of("archive")) == std::vector<std::string>{"", ""});
  CHECK(hosts_of_chain(job, *p, chain_of("logs")) == std::vector<std::string>{"", ""});
  CHECK(site("shared_logs").site == ChainSite::Spread);
  CHECK(hosts_of_chain(job, *p, chain_of("shared_logs")) == std::vector<std::string>{"w1", "w2"});
  CHECK(hosts_of_chain(job, *p, chain_of("ok")) == std::vector<std::string>{"w1", "w2"});
  // in, out: 1 each; logs, archive: 2 each. They take no slots: 4 slots hold the other 4 tasks.
  CHECK(count_per_host(*p) == std::map<std::string, int>{{"", 6}, {"w1", 2}, {"w2", 2}});
}

TEST_CASE("a pinned node takes its whole chain to its host", "[placement]") {
  std::vector<PlacementHost> hosts = {{"w1", 3}, {"ops@w2", 3}};
  // Pins per_user, and out fused with it.
  Job job = load(keyed_job(3, "host = \"w2\"\n") + cluster_of_hosts(hosts));
  auto p = place(job.spec, job.plan, hosts);
  REQUIRE(p);
  CHECK(p->chains[1].site == ChainSite::Pinned);
  CHECK(p->chains[1].host == "ops@w2");
  CHECK(p->chains[1].reason == "pinned by operator 'per_user'");
  CHECK(hosts_of_chain(job, *p, 1) == std::vector<std::string>{"ops@w2", "ops@w2", "ops@w2"});
  // The pinned chain took w2's slots first: g goes to w1 whole.
  CHECK(hosts_of_chain(job, *p, 0) == std::vector<std::string>{"w1", "w1", "w1"});

  // A pinned file node needs no `shared`: its path is on that host. Fused nodes pin together.
  job = load(R"toml(name = "f"
[sources.logs]
type = "file"
path = "/var/log/app.jsonl"
host = "w1"
[sinks.out]
type = "file"
path = "/var/log/app.out"
inputs = ["logs"]
host = "w1"
[cluster]
hosts = ["w1"]
)toml");
  p = place(job.spec, job.plan, {{"w1", 1}});
  REQUIRE(p);
  CHECK(hosts_of_chain(job, *p, 0) == std::vector<std::string>{"w1"});
}

TEST_CASE("conflicting pins in one chain are refused", "[placement]") {
  Job job = load(R"toml(name = "x"
[sources.g]
type = "generator"
host = "w1"
[operators.ok]
type = "filter"
inputs = ["g"]
where = "true"
host = "w2"
[sinks.out]
type = "file"
path = "out"
shared = true
inputs = ["ok"]
[cluster]
hosts = ["w1", "w2"]
)toml");
  auto p = place(job.spec, job.plan, {{"w1", 4}, {"w2", 4}});
  REQUIRE_FALSE(p);
  CHECK(p.error() ==
        "chain 0 'g -> ok -> out' x1 runs in one process per subtask, but source 'g' pins it "
        "to 'w1' and operator 'ok' to 'w2': pin them to the same host, or split the "
        "chain with partition = \"rebalance\" on the second");

  job = load(R"toml(name = "x"
[sources.logs]
type = "file"
path = "logs.jsonl"
[operators.ok]
type = "filter"
inputs = ["logs"]
where = "true"
host = "w2"
[sinks.out]
type = "file"
path = "out"
shared = true
inputs = ["ok"]
[cluster]
hosts = ["w1", "w2"]
)toml");
  p = place(job.spec, job.plan, {{"w1", 4}, {"w2", 4}});
  REQUIRE_FALSE(p);
  CHECK(p.error() == "chain 0 'logs -> ok -> out' x1 must run on the coordinator's host (file "
                     "source 'logs' reads a path on the coordinator's host (it is not shared = "
                     "true)), but operator 'ok' pins it to 'w2': pin the file node to that host "
                     "too, mark it shared = true, or split the chain with partition = "
                     "\"rebalance\"");

  // A stdout sink of parallelism 1 fuses with a pinned node of parallelism 1.
  job = load(R"toml(name = "x"
[sources.g]
type = "generator"
[operators.ok]
type = "filter"
inputs = ["g"]
where = "true"
host = "w2"
[sinks.out]
type = "stdout"
inputs = ["ok"]
[cluster]
hosts = ["w1", "w2"]
)toml");
  p = place(job.spec, job.plan, {{"w1", 4}, {"w2", 4}});
  REQUIRE_FALSE(p);
  CHECK(p.error() == "chain 0 'g -> ok -> out' x1 must run on the coordinator's host (stdout sink "
                     "'out' writes the coordinator's terminal), but operator 'ok' pins it to "
                     "'w2': remove 'host', or split the chain: partition = \"rebalance\" on the "
                     "node that follows the pinned one");
}

TEST_CASE("a pin to a host the launcher does not have is refused at placement", "[placement]") {
  // Under slurm, validation cannot know the nodes; placement checks them.
  Job job = load(keyed_job(2, "host = \"node7\"\n") + "[cluster]\nlauncher = \"slurm\"\n");
  auto p = place(job.spec, job.plan, {{"node1", 8}, {"node2", 8}});
  REQUIRE_FALSE(p);
  CHECK(p.error() == "operator 'per_user' pins itself to host 'node7', which is not among the "
                     "job's hosts: node1, node2");
}

TEST_CASE("not enough slots: the need, each host's slots and the fixes", "[placement]") {
  Job job = load(keyed_job(4));
  auto p = place(job.spec, job.plan, {{"w1", 2}, {"ops@w2", 2}, {"w3", 3}});
  REQUIRE_FALSE(p);
  CHECK(p.error() == "not enough slots: the job needs 8 on its hosts, one per task that does not "
                     "run on the coordinator's host (chain 0 'g' x4, chain 1 'per_user -> out' "
                     "x4), but the hosts have 7: w1 2, ops@w2 2, w3 3. Give the hosts more slots "
                     "({ host = \"NAME\", slots = N } in [cluster] hosts), add hosts, or lower the "
                     "parallelism (-p, or a node's parallelism)");

  std::vector<PlacementHost> small_w2 = {{"w1", 8}, {"ops@w2", 2}};
  job = load(keyed_job(3, "host = \"ops@w2\"\n") + cluster_of_hosts(small_w2));
  p = place(job.spec, job.plan, small_w2);
  REQUIRE_FALSE(p);
  CHECK(p.error() == "host 'ops@w2' has 2 slot(s), but the nodes pinned to it need 3 (chain 1 "
                     "'per_user -> out' x3): give it more slots ({ host = \"w2\", slots = 3} in "
                     "[cluster] hosts), pin fewer nodes to it, or lower their parallelism");
}

TEST_CASE("without hosts every task runs on the coordinator's host", "[placement]") {
  Job job = load(keyed_job(3));
  auto p = place(job.spec, job.plan, {});
  REQUIRE(p);
  CHECK(p->task_hosts == std::vector<std::string>(job.plan.tasks.size(), ""));
  CHECK(p->chains[0].reason == "no hosts");
}

TEST_CASE("placement is deterministic", "[placement]") {
  Job job = load(keyed_job(5));
  std::vector<PlacementHost> hosts = {{"a", 3}, {"b", 4}, {"c", 2}, {"d", 1}};
  auto first = place(job.spec, job.plan, hosts);
  REQUIRE(first);
  for (int k = 0; k < 5; ++k) {
    Job again = load(keyed_job(5));
    auto p = place(again.spec, again.plan, hosts);
    REQUIRE(p);
    CHECK(p->task_hosts == first->task_hosts);
  }
}

TEST_CASE("the graph preview: hosts without slots placed as if large enough", "[placement]") {
  Job job = load(keyed_job(4) + "[cluster]\nhosts = [\"w1\", { host = \"w2\", slots = 1 }]\n");
  PlacementPreview pv = preview_placement(job.spec, job.plan);
  REQUIRE(pv.placement);
  CHECK(pv.assumed == std::vector<std::string>{"w1"});
  REQUIRE(pv.hosts.size() == 2);
  CHECK(pv.hosts[0].slots == 8); // as many as the job has tasks
  CHECK(pv.hosts[1].slots == 1);
  CHECK(count_per_host(*pv.placement) == std::map<std::string, int>{{"w1", 7}, {"w2", 1}});

  // Explicit slots everywhere: the preview is the placement, and its failure.
  job = load(keyed_job(4) + "[cluster]\nhosts = [{ host = \"w1\", slots = 3 }]\n");
  pv = preview_placement(job.spec, job.plan);
  REQUIRE_FALSE(pv.placement);
  CHECK_THAT(pv.placement.error(), Catch::StartsWith("not enough slots: the job needs 8"));

  // Slurm: the allocation's nodes are not known; pinned names stand for nodes.
  job = load(keyed_job(2, "host = \"node3\"\n") + "[cluster]\nlauncher = \"slurm\"\n");
  pv = preview_placement(job.spec, job.plan);
  REQUIRE(pv.placement);
  CHECK(hosts_of_chain(job, *pv.placement, 1) == std::vector<std::string>{"node3", "node3"});
  CHECK(pv.placement->chains[0].site == ChainSite::Spread);
}

TEST_CASE("random parallelism, slots and pins: every task placed within every host's slots",
          "[placement]") {
  std::mt19937 rng(20261201);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int placed = 0, refused = 0;
  for (int round = 0; round < 300; ++round) {
    std::vector<PlacementHost> hosts;
    int host_count = uniform(1, 5);
    for (int h = 0; h < host_count; ++h)
      hosts.push_back({(uniform(0, 1) ? "u@h" : "h") + std::to_string(h), uniform(1, 6)});
    int p_source = uniform(1, 6), p_reduce = uniform(1, 6), p_sink = uniform(1, 6);
    int pinned_host = uniform(-1, host_count - 1); // -1: no pin
    std::string pin;
    if (pinned_host >= 0)
      pin = "host = \"" +
            std::string(host_address(hosts[static_cast<std::size_t>(pinned_host)].name)) + "\"\n";
    bool shared_source = uniform(0, 1) == 1;
    std::string text = "name = \"r\"\n[sources.s]\ntype = \"" +
                       std::string(shared_source ? "file" : "generator") + "\"\n" +
                       (shared_source ? "path = \"/nfs/in\"\nshared = true\n" : "") +
                       "parallelism = " + std::to_string(p_source) + R"toml(
[sources.in]
type = "stdin"
[operators.per_user]
type = "reduce"
inputs = ["s", "in"]
key = ["user"]
aggregates = { n = "count()" }
parallelism = )toml" + std::to_string(p_reduce) +
                       "\n" + pin + R"toml(
[sinks.out]
type = "file"
path = "out"
inputs = ["per_user"]
shared = true
parallelism = )toml" + std::to_string(p_sink) +
                       "\n" + cluster_of_hosts(hosts);
    Job job = load(text);
    auto p = place(job.spec, job.plan, hosts);

    int capacity = 0;
    for (const auto& h : hosts)
      capacity += h.slots;
    int on_hosts = 0, pinned = 0;
    for (const auto& c : job.plan.chains) {
      bool terminal = job.spec.nodes[c.nodes[0]].type == "stdin";
      bool is_pinned = false;
      for (std::size_t n : c.nodes)
        is_pinned = is_pinned || !job.spec.nodes[n].host.empty();
      if (!terminal) on_hosts += c.parallelism;
      if (is_pinned) pinned += c.parallelism;
    }
    int pinned_slots = pinned_host >= 0 ? hosts[static_cast<std::size_t>(pinned_host)].slots : 0;
    bool fits = on_hosts <= capacity && pinned <= (pinned_host >= 0 ? pinned_slots : 0);
    INFO("round " << round << "\n" << text << "\n" << (p ? "" : p.error()));
    REQUIRE(static_cast<bool>(p) == fits);
    if (!p) {
      ++refused;
      continue;
    }
    ++placed;
    REQUIRE(p->task_hosts.size() == job.plan.tasks.size());
    std::map<std::string, int> used = count_per_host(*p);
    for (const auto& h : hosts)
      CHECK(used[h.name] <= h.slots);
    for (const auto& t : job.plan.tasks) {
      const Chain& c = job.plan.chains[static_cast<std::size_t>(t.chain)];
      const NodeSpec& head = job.spec.nodes[c.nodes[0]];
      const std::string& at = p->host_of(t.id);
      if (head.type == "stdin") {
        CHECK(at.empty());
        continue;
      }
      bool known = std::any_of(hosts.begin(), hosts.end(),
                               [&](const PlacementHost& h) { return h.name == at; });
      CHECK(known); // every other task is on a host, none left on the coordinator's
      for (std::size_t n : c.nodes)
        if (!job.spec.nodes[n].host.empty())
          CHECK(at == hosts[static_cast<std::size_t>(pinned_host)].name);
    }
    // Spreading: while a host with free slots holds fewer of a chain's subtasks, no host holds
    // two more than it.
    for (const auto& c : job.plan.chains) {
      if (p->chains[static_cast<std::size_t>(c.id)].site != ChainSite::Spread) continue;
      std::map<std::string, int> held;
      for (const auto& t : job.plan.tasks)
        if (t.chain == c.id) ++held[p->host_of(t.id)];
      for (const auto& h : hosts)
        if (used[h.name] < h.slots)
          for (const auto& [other, n] : held)
            CHECK(n <= held[h.name] + 1);
    }
  }
  // Both outcomes were exercised.
  CHECK(placed > 50);
  CHECK(refused > 20);
}
