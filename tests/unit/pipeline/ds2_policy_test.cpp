#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <utility>

#include "operators/registry.hpp"
#include "pipeline/runtime/ds2_policy.hpp"
#include "pipeline/runtime/job_loader.hpp"
#include "unit/all_node_types.hpp"

using namespace streamctl;
using runtime::Ds2Decision;
using runtime::Ds2NodeDecision;
using runtime::Ds2Observation;

namespace {

runtime::LoadedJob load(const std::string& text) {
  operators::Registry registry;
  operators::register_builtin_types(registry);
  return runtime::load_job_text(text, "ds2.toml", std::filesystem::current_path(), {}, registry);
}

runtime::AutoscaleSettings settings(int min = 1, int max = 8, double utilization = 0.7) {
  runtime::AutoscaleSettings s;
  s.enabled = true;
  s.min_parallelism = min;
  s.max_parallelism = max;
  s.target_utilization = utilization;
  return s;
}

// One second of a node's `parallelism` subtasks, sharing `in`/`out` records per second evenly,
// each busy for `busy` of the second.
void observe(std::vector<Ds2Observation>& out, const std::string& node, int parallelism, double in,
             double out_rate, double busy) {
  for (int s = 0; s < parallelism; ++s)
    out.push_back(Ds2Observation{node, s, 1.0, in / parallelism, out_rate / parallelism, busy});
}

const Ds2NodeDecision& row(const Ds2Decision& d, const std::string& node) {
  for (const auto& r : d.nodes)
    if (r.node == node) return r;
  FAIL("no row for " << node);
  return d.nodes.front();
}

std::string describe(const Ds2Decision& d) {
  std::string text;
  for (const auto& r : d.nodes)
    text += r.node + ": " + std::to_string(r.current) + " -> " + std::to_string(r.optimal) + " (" +
            r.reason + ")\n";
  return text;
}

// generator -> map -> window -> stdout, none fused: the map's `partition` and the window's
// parallelism cut the chains.
std::string linear(int map_parallelism, int window_parallelism, const std::string& rate) {
  return R"toml(name = "ds2"
[sources.g]
type = "generator"
)toml" + rate +
         R"toml(
[operators.m]
type = "map"
inputs = ["g"]
partition = "rebalance"
parallelism = )toml" +
         std::to_string(map_parallelism) + R"toml(
set = { x = "seq * 2" }
[operators.w]
type = "window"
inputs = ["m"]
key = ["x"]
parallelism = )toml" +
         std::to_string(window_parallelism) + R"toml(
window = { kind = "tumbling", size = "1s" }
aggregates = { n = "count()" }
[sinks.out]
type = "stdout"
inputs = ["w"]
)toml";
}

} // namespace

TEST_CASE("DS2: a linear job reaches every optimum in one decision", "[ds2]") {
  auto job = load(linear(1, 2, "rate = 2000"));
  REQUIRE(job.plan.chains.size() == 4);
  std::vector<Ds2Observation> obs;
  // Backpressure holds the source at 1000/s; the map is busy all the time (1000/s per busy
  // second), the window's two instances a little less than half (1250/s per busy second).
  observe(obs, "g", 1, 0, 1000, 0.3);
  observe(obs, "m", 1, 1000, 1000, 1.0);
  observe(obs, "w", 2, 1000, 10, 0.4);
  observe(obs, "out", 1, 10, 0, 0.01);
  Ds2Decision d = runtime::decide_ds2(job.spec, job.plan, obs, settings());
  INFO(describe(d));
  // The map needs 2000 / (1000 x 0.7) = 2.86 instances.
  CHECK(row(d, "m").optimal == 3);
  CHECK(row(d, "m").target_in == Approx(2000));
  CHECK(row(d, "m").true_in == Approx(1000));
  CHECK(row(d, "m").required == Approx(2000.0 / 700));
  // The window is sized for the map's target output, not for what it sees now: 2000 / (1250 x
  // 0.7) = 2.29 instances, more than 10% above its 2.
  CHECK(row(d, "w").target_in == Approx(2000));
  CHECK(row(d, "w").optimal == 3);
  // The source keeps up with its rate at 30% busy; the stdout sink is single-instance.
  CHECK(row(d, "g").optimal == 1);
  CHECK(row(d, "out").optimal == 1);
  auto changes = d.changes();
  REQUIRE(changes.size() == 2);
  CHECK(changes[0].node == "m");
  CHECK(changes[1].node == "w");
  CHECK(d.rescale_request() == "m=3\nw=3\n");
  CHECK(row(d, "m").summary() == "m: 1 -> 3, target in 2000/s, true rate 1000/s per instance, "
                                 "selectivity 1.00 (needs 2.86 instances at 0.70 utilization)");
}

TEST_CASE("DS2: a job of the right size is left alone", "[ds2]") {
  auto job = load(linear(3, 2, "rate = 2000"));
  std::vector<Ds2Observation> obs;
  observe(obs, "g", 1, 0, 2000, 0.6);
  observe(obs, "m", 3, 2000, 2000, 2.0 / 3); // 1000/s per busy second: needs 2.86
  observe(obs, "w", 2, 2000, 10, 0.5);       // 2000/s per busy second: needs 1.43
  observe(obs, "out", 1, 10, 0, 0.01);
  Ds2Decision d = runtime::decide_ds2(job.spec, job.plan, obs, settings());
  INFO(describe(d));
  CHECK(d.changes().empty());
  CHECK(d.rescale_request().empty());
  for (const auto& r : d.nodes)
    CHECK(r.decided);
}

TEST_CASE("DS2: selectivity scales what downstream must handle", "[ds2]") {
  auto text = [](const std::string& where) {
    return R"toml(name = "ds2"
[sources.g]
type = "generator"
rate = 4000
[operators.f]
type = "filter"
inputs = ["g"]
partition = "rebalance"
where = ")toml" +
           where + R"toml("
[operators.m]
type = "map"
inputs = ["f"]
partition = "rebalance"
set = { y = "1" }
[sinks.out]
type = "file"
path = "out.jsonl"
inputs = ["m"]
partition = "rebalance"
)toml";
  };
  auto decide = [&](double passed) {
    // The filter's expression does not matter: DS2 sees only what it was observed doing.
    auto job = load(text("seq % 2 == 0"));
    std::vector<Ds2Observation> obs;
    observe(obs, "g", 1, 0, 1000, 0.2);
    observe(obs, "f", 1, 1000, 1000 * passed, 0.1);
    observe(obs, "m", 1, 1000 * passed, 1000 * passed, passed); // 1000/s per busy second
    observe(obs, "out", 1, 1000 * passed, 0, 0.1);
    return runtime::decide_ds2(job.spec, job.plan, obs, settings(1, 16));
  };
  Ds2Decision half = decide(0.5);
  INFO(describe(half));
  CHECK(row(half, "f").selectivity == Approx(0.5));
  CHECK(row(half, "m").target_in == Approx(2000));
  CHECK(row(half, "m").optimal == 3); // 2000 / 700 = 2.86
  Ds2Decision all = decide(1.0);
  INFO(describe(all));
  CHECK(row(all, "m").target_in == Approx(4000));
  CHECK(row(all, "m").optimal == 6); // 4000 / 700 = 5.71
}

TEST_CASE("DS2: the optimum is clamped to [min_parallelism, max_parallelism]", "[ds2]") {
  auto job = load(linear(2, 2, "rate = 20000"));
  std::vector<Ds2Observation> obs;
  observe(obs, "g", 1, 0, 2000, 0.1);
  observe(obs, "m", 2, 2000, 2000, 1.0); // 1000/s per busy second: needs 28.6
  observe(obs, "w", 2, 2000, 10, 0.001); // nearly idle: needs 0.02
  observe(obs, "out", 1, 10, 0, 0.01);
  Ds2Decision d = runtime::decide_ds2(job.spec, job.plan, obs, settings(2, 8));
  INFO(describe(d));
  CHECK(row(d, "m").optimal == 8);
  CHECK(row(d, "m").reason.find("clamped to max_parallelism 8") != std::string::npos);
  CHECK(row(d, "w").required.value() < 1);
  CHECK(row(d, "w").optimal == 2);
  CHECK(row(d, "w").reason.find("clamped to min_parallelism 2") != std::string::npos);
  // The source makes 20000/s per busy second: 20000/s at 0.7 takes 1.43 of it, so it grows
  // too, to the minimum of 2.
  CHECK(row(d, "g").optimal == 2);
  // The stdout sink stays single-instance whatever min_parallelism says.
  CHECK(row(d, "out").optimal == 1);
}

TEST_CASE("DS2: a join's target input is the sum of both sides", "[ds2]") {
  auto job = load(R"toml(name = "ds2"
[sources.a]
type = "generator"
rate = 1000
[sources.b]
type = "generator"
rate = 3000
[operators.j]
type = "join"
inputs = ["a", "b"]
parallelism = 2
on = { left = "seq", right = "seq" }
interval = { lower = "-1s", upper = "0s" }
[sinks.out]
type = "file"
path = "out.jsonl"
inputs = ["j"]
parallelism = 2
)toml");
  std::vector<Ds2Observation> obs;
  observe(obs, "a", 1, 0, 500, 0.1);
  observe(obs, "b", 1, 0, 1500, 0.3);
  observe(obs, "j", 2, 2000, 500, 1.0); // 1000/s per busy second
  observe(obs, "out", 2, 500, 0, 0.1);
  Ds2Decision d = runtime::decide_ds2(job.spec, job.plan, obs, settings());
  INFO(describe(d));
  CHECK(row(d, "j").target_in == Approx(4000));
  CHECK(row(d, "j").optimal == 6);               // 4000 / 700 = 5.71
  CHECK(row(d, "j").target_out == Approx(1000)); // selectivity 0.25
  // The sink, fused with the join (forward, equal parallelism), takes its parallelism.
  CHECK(row(d, "out").target_in == Approx(1000));
  CHECK(row(d, "out").optimal == 6);
}

TEST_CASE("DS2: observations 10% either side of the right size do not flip the decision", "[ds2]") {
  // The map needs 2.5 instances of 1000/s at 0.7 for 1750/s; it has 3.
  auto job = load(linear(3, 2, ""));
  // Every corner of the noise, then random points inside it.
  std::vector<std::pair<double, double>> factors;
  for (double a : {0.9, 0.95, 1.0, 1.05, 1.1})
    for (double b : {0.9, 0.95, 1.0, 1.05, 1.1})
      factors.emplace_back(a, b);
  std::mt19937 random(20181008);
  std::uniform_real_distribution<double> noise(0.9, 1.1);
  for (int k = 0; k < 200; ++k)
    factors.emplace_back(noise(random), noise(random));
  bool outside_ceiling = false; // a sample that ceil(required) alone would have rescaled
  for (auto [rate_factor, true_rate_factor] : factors) {
    double rate = 1750 * rate_factor;
    double true_rate = 1000 * true_rate_factor;
    std::vector<Ds2Observation> obs;
    observe(obs, "g", 1, 0, rate, 0.5);
    observe(obs, "m", 3, rate, rate, rate / true_rate / 3);
    observe(obs, "w", 2, rate, 10, rate / 1500 / 2); // needs about 1.67 of its 2
    observe(obs, "out", 1, 10, 0, 0.01);
    Ds2Decision d = runtime::decide_ds2(job.spec, job.plan, obs, settings());
    INFO(describe(d));
    REQUIRE(row(d, "m").decided);
    REQUIRE(row(d, "m").optimal == 3);
    REQUIRE(d.changes().empty());
    double required = row(d, "m").required.value();
    if (std::ceil(required) != 3) outside_ceiling = true;
  }
  CHECK(outside_ceiling); // the hysteresis band was exercised, not just the ceiling
}

TEST_CASE("DS2: hysteresis still grows and shrinks beyond 10%", "[ds2]") {
  auto job = load(linear(3, 2, ""));
  auto decide_for = [&](double rate) {
    std::vector<Ds2Observation> obs;
    observe(obs, "g", 1, 0, rate, 0.5);
    observe(obs, "m", 3, rate, rate, std::min(1.0, rate / 1000 / 3));
    observe(obs, "w", 2, rate, 10, 0.2);
    observe(obs, "out", 1, 10, 0, 0.01);
    return row(runtime::decide_ds2(job.spec, job.plan, obs, settings()), "m");
  };
  CHECK(decide_for(2100).optimal == 3); // needs 3.0
  CHECK(decide_for(2100).reason == "needs 3.00 instances at 0.70 utilization: kept");
  CHECK(decide_for(2200).optimal == 3); // needs 3.14
  CHECK(decide_for(2200).reason ==
        "needs 3.14 instances at 0.70 utilization: within 10% of the current capacity, kept");
  CHECK(decide_for(2400).optimal == 4); // needs 3.43: more than 10% above 3
  CHECK(decide_for(1300).optimal == 3); // needs 1.86: 2 instances would leave less than 10% spare
  CHECK(decide_for(1300).reason == "needs 1.86 instances at 0.70 utilization: one instance "
                                   "fewer would leave less than 10% to spare, kept");
  CHECK(decide_for(1000).optimal == 2); // needs 1.43: 2 leave more than 10% to spare
}

TEST_CASE("DS2: no data, no decision", "[ds2]") {
  auto job = load(linear(1, 2, "rate = 2000"));
  SECTION("zero busy time") {
    std::vector<Ds2Observation> obs;
    observe(obs, "g", 1, 0, 0, 0);
    observe(obs, "m", 1, 0, 0, 0);
    observe(obs, "w", 2, 0, 0, 0);
    observe(obs, "out", 1, 0, 0, 0);
    Ds2Decision d = runtime::decide_ds2(job.spec, job.plan, obs, settings());
    INFO(describe(d));
    CHECK(d.changes().empty());
    CHECK_FALSE(row(d, "m").decided);
    CHECK(row(d, "m").reason == "no busy time yet");
    CHECK_FALSE(row(d, "w").decided);
  }
  SECTION("a node with no observations, and the nodes downstream of it") {
    std::vector<Ds2Observation> obs;
    observe(obs, "g", 1, 0, 1000, 0.3);
    observe(obs, "w", 2, 1000, 10, 1.0);
    observe(obs, "out", 1, 10, 0, 0.01);
    Ds2Decision d = runtime::decide_ds2(job.spec, job.plan, obs, settings());
    INFO(describe(d));
    CHECK(d.changes().empty());
    CHECK(row(d, "m").reason == "no observations");
    CHECK_FALSE(row(d, "w").target_in.has_value());
    CHECK(row(d, "w").reason == "no target input: upstream 'm' has no target output");
  }
  SECTION("observations of unknown nodes are ignored") {
    std::vector<Ds2Observation> obs;
    observe(obs, "gone", 4, 100, 100, 1.0);
    Ds2Decision d = runtime::decide_ds2(job.spec, job.plan, obs, settings());
    CHECK(d.changes().empty());
    for (const auto& r : d.nodes)
      CHECK(r.subtasks_observed == 0);
  }
}

TEST_CASE("DS2: a fused chain gets one parallelism; its source only grows", "[ds2]") {
  // g -> f -> m fuse (forward, equal parallelism); the sink is its own chain.
  auto text = [](const std::string& rate) {
    return R"toml(name = "ds2"
parallelism = 2
[sources.g]
type = "generator"
)toml" + rate +
           R"toml(
[operators.f]
type = "filter"
inputs = ["g"]
where = "seq % 2 == 0"
[operators.m]
type = "map"
inputs = ["f"]
set = { y = "1" }
[sinks.out]
type = "file"
path = "out.jsonl"
inputs = ["m"]
parallelism = 1
)toml";
  };
  auto observations = [](double rate, double busy) {
    std::vector<Ds2Observation> obs;
    observe(obs, "g", 2, 0, rate, busy);
    observe(obs, "f", 2, rate, rate / 2, busy);
    observe(obs, "m", 2, rate / 2, rate / 2, busy);
    observe(obs, "out", 1, rate / 2, 0, 0.1);
    return obs;
  };
  SECTION("with a configured rate above what the chain can do, it grows as one") {
    auto job = load(text("rate = 6000"));
    REQUIRE(pipeline::chain_label(job.spec, job.plan.chains[0]) == "g -> f -> m");
    // The chain does 2000/s with both tasks busy: 1000/s per busy second. 6000 / 700 = 8.6.
    Ds2Decision d =
        runtime::decide_ds2(job.spec, job.plan, observations(2000, 1.0), settings(1, 16));
    INFO(describe(d));
    CHECK(row(d, "g").optimal == 9);
    CHECK(row(d, "f").optimal == 9);
    CHECK(row(d, "m").optimal == 9);
    // Every node of the chain finds the same need: they share one clock.
    CHECK(row(d, "f").required.value() == Approx(row(d, "g").required.value()));
    CHECK(row(d, "m").required.value() == Approx(row(d, "g").required.value()));
  }
  SECTION("with a configured rate it can do with less, it is not shrunk") {
    auto job = load(text("rate = 500"));
    Ds2Decision d = runtime::decide_ds2(job.spec, job.plan, observations(500, 0.1), settings());
    INFO(describe(d));
    CHECK(row(d, "g").optimal == 2);
    CHECK(row(d, "g").reason.find("a source is not shrunk") != std::string::npos);
  }
  SECTION("without a configured rate, its observed rate is the demand: kept") {
    auto job = load(text(""));
    Ds2Decision d = runtime::decide_ds2(job.spec, job.plan, observations(2000, 1.0), settings());
    INFO(describe(d));
    CHECK(row(d, "m").optimal == 2);
    CHECK(row(d, "m").decided);
    CHECK(row(d, "m").reason.find("source without a configured rate") != std::string::npos);
    // Downstream is still sized for the observed rate: the sink needs 1000 / (10000 x 0.7).
    CHECK(row(d, "out").target_in == Approx(1000));
  }
  SECTION("a rate given by the controller overrides the configured one") {
    auto job = load(text("rate = 500"));
    Ds2Decision d = runtime::decide_ds2(job.spec, job.plan, observations(2000, 1.0),
                                        settings(1, 16), {{"g", 4000.0}});
    INFO(describe(d));
    CHECK(row(d, "g").target_out == Approx(4000));
    CHECK(row(d, "g").optimal == 6); // 4000 / 700 = 5.7
  }
}

TEST_CASE("DS2: a chain with a one-subtask source (tcp, stdin) keeps parallelism 1", "[ds2]") {
  // Validation refuses `parallelism` > 1 for these sources, so the autoscaler must not ask for
  // it, however loaded the chain: it reports why instead.
  const operators::Registry& registry = testing::all_node_types();
  for (std::string source : {"type = \"tcp\"\naddress = \"127.0.0.1:9000\"", "type = \"stdin\""}) {
    auto job = runtime::load_job_text(R"toml(name = "ds2"
[sources.in]
)toml" + source + R"toml(
[operators.m]
type = "map"
inputs = ["in"]
set = { y = "1" }
[sinks.out]
type = "file"
path = "out.jsonl"
inputs = ["m"]
)toml",
                                      "ds2.toml", std::filesystem::current_path(), {}, registry);
    REQUIRE(pipeline::chain_label(job.spec, job.plan.chains[0]) == "in -> m -> out");
    std::vector<Ds2Observation> obs;
    observe(obs, "in", 1, 0, 1000, 1.0);
    observe(obs, "m", 1, 1000, 1000, 1.0);
    observe(obs, "out", 1, 1000, 0, 0.1);
    Ds2Decision d = runtime::decide_ds2(job.spec, job.plan, obs, settings(1, 16), {{"in", 4000.0}});
    INFO(source << "\n" << describe(d));
    CHECK(row(d, "in").optimal == 1);
    CHECK(row(d, "m").optimal == 1);
    CHECK(row(d, "m").reason.find("'in' runs with parallelism 1") != std::string::npos);
  }
}

TEST_CASE("DS2: a broadcast input loads every instance", "[ds2]") {
  auto job = load(R"toml(name = "ds2"
[sources.big]
type = "generator"
rate = 2000
[sources.small]
type = "generator"
rate = 100
[operators.j]
type = "join"
inputs = ["big", "small"]
strategy = "broadcast"
parallelism = 2
on = { left = "seq", right = "seq" }
interval = { lower = "-1s", upper = "0s" }
[sinks.out]
type = "file"
path = "out.jsonl"
inputs = ["j"]
partition = "rebalance"
)toml");
  bool broadcast = false;
  for (const auto& e : job.plan.edges)
    if (e.partition == pipeline::Partition::Broadcast) broadcast = true;
  REQUIRE(broadcast);
  std::vector<Ds2Observation> obs;
  observe(obs, "big", 1, 0, 1000, 0.1);
  observe(obs, "small", 1, 0, 100, 0.1);
  // Each instance reads half of big and all of small: 600/s, busy all the time.
  observe(obs, "j", 2, 1200, 100, 1.0);
  observe(obs, "out", 1, 100, 0, 0.1);
  Ds2Decision d = runtime::decide_ds2(job.spec, job.plan, obs, settings(1, 16));
  INFO(describe(d));
  // An instance does 600/s, 420/s at 0.7; 100/s of it is small's: 2000 / 320 = 6.25.
  CHECK(row(d, "j").required.value() == Approx(2000.0 / 320));
  CHECK(row(d, "j").optimal == 7);
  // Target input counts small's records once per current instance.
  CHECK(row(d, "j").target_in == Approx(2200));

  SECTION("when the broadcast side alone is more than an instance can take, it is kept") {
    std::map<std::string, double> rates = {{"small", 500.0}};
    Ds2Decision over = runtime::decide_ds2(job.spec, job.plan, obs, settings(1, 16), rates);
    INFO(describe(over));
    CHECK(row(over, "j").optimal == 2);
    CHECK(row(over, "j").reason.find("broadcast input alone") != std::string::npos);
  }
}

TEST_CASE("DS2: observations add up over time and convert from SubtaskMetrics", "[ds2]") {
  runtime::SubtaskMetrics m;
  m.node = "m";
  m.subtask = 2;
  m.records_in_per_s = 900;
  m.records_out_per_s = 450;
  m.busy = 0.75;
  Ds2Observation o = runtime::observation_of(m);
  CHECK(o.node == "m");
  CHECK(o.subtask == 2);
  CHECK(o.interval_s == 1);
  CHECK(o.records_in == 900);
  CHECK(o.records_out == 450);
  CHECK(o.busy == 0.75);

  // Two seconds of the same subtask: 2000 records over 2 s, busy 0.5 then 1.0.
  auto job = load(linear(1, 2, "rate = 1000"));
  std::vector<Ds2Observation> obs;
  observe(obs, "g", 1, 0, 1000, 0.3);
  obs.push_back(Ds2Observation{"m", 0, 1.0, 800, 800, 0.5});
  obs.push_back(Ds2Observation{"m", 0, 1.0, 1200, 1200, 1.0});
  Ds2Decision d = runtime::decide_ds2(job.spec, job.plan, obs, settings());
  CHECK(row(d, "m").observed_in == Approx(1000));
  CHECK(row(d, "m").busy == Approx(0.75));
  CHECK(row(d, "m").subtasks_observed == 1);
}
