// Checkpointed state of the stateful operators (operators/operator.hpp, "Checkpointed state"):
// snapshot every key group and the subtask state mid-stream, restore into new instances at
// another parallelism (each new subtask reads only the key groups it owns), finish, and get
// exactly the output of an uninterrupted run. Also: corrupt segments fail cleanly.

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "harness.hpp"
#include "operators/partition_key.hpp"
#include "state/key_group.hpp"

using streamctl::testing::Harness;
using streamctl::testing::OperatorRun;
namespace ops = streamctl::operators;
namespace st = streamctl::state;

namespace {

using Lines = std::vector<std::string>;

Lines sorted(Lines v) {
  std::sort(v.begin(), v.end());
  return v;
}

// One step of an input: records of one input, or a watermark.
struct Step {
  bool is_watermark = false;
  std::int64_t watermark = 0;
  int input = 0;
  Lines lines;
  std::vector<int> key_groups; // per line
};

struct Scenario {
  std::string toml;
  std::vector<Step> steps;
  bool broadcast = false; // a broadcast join: left by record number, right to everyone
  // The operator decodes its key groups off the task thread (Operator::load_key_group).
  bool loads_off_thread = false;
};

// The key group of every record, as the data plane routes them (PartitionKey).
void assign_key_groups(Harness& h, Scenario& s) {
  const auto& spec = h.job().spec;
  const auto max_parallelism = static_cast<std::uint32_t>(spec.max_parallelism);
  std::optional<ops::PartitionKey> keys[2] = {
      ops::PartitionKey::for_input(spec, h.node("op"), 0, h.names()),
      h.node("op").inputs.size() > 1
          ? ops::PartitionKey::for_input(spec, h.node("op"), 1, h.names())
          : std::nullopt};
  std::string bytes;
  for (Step& step : s.steps) {
    if (step.is_watermark) continue;
    st::Batch b = h.parse(step.lines, 0, step.lines.size(), "ts");
    step.key_groups.clear();
    for (const auto& r : b) {
      keys[step.input]->encode(r, h.names(), bytes);
      step.key_groups.push_back(
          static_cast<int>(st::key_group_of(st::hash_key_bytes(bytes), max_parallelism)));
    }
  }
}

struct Outcome {
  Lines out;
  Lines late;
  std::uint64_t errors = 0;
  std::size_t segments = 0; // key-group segments written at the cut
  std::size_t segment_bytes = 0;
  std::size_t restored_groups = 0;  // at the new parallelism
  std::size_t off_thread_loads = 0; // of those, decoded by load_key_group on a helper thread
};

// Restores `segments` that fall in `range` into `op`. In parallel, as the runtime does: two
// helper threads decode every group with load_key_group at once, then the loads are installed
// in group order on this thread; a group without a load (nullptr) is restored here.
void restore_groups(ops::Operator& op, st::KeyGroupRange range,
                    const std::map<std::uint32_t, std::string>& segments, bool parallel, Outcome& o) {
  std::vector<std::uint32_t> groups;
  for (std::uint32_t kg = range.first; kg < range.end; ++kg)
    if (segments.count(kg) != 0) groups.push_back(kg);
  o.restored_groups += groups.size();
  std::vector<std::optional<streamctl::Result<std::unique_ptr<ops::Operator::KeyGroupLoad>>>> loads(
      groups.size());
  if (parallel) {
    std::vector<std::thread> helpers;
    for (std::size_t t = 0; t < 2; ++t)
      helpers.emplace_back([&, t] {
        for (std::size_t k = t; k < groups.size(); k += 2)
          loads[k].emplace(op.load_key_group(groups[k], segments.at(groups[k])));
      });
    for (auto& helper : helpers)
      helper.join();
  }
  for (std::size_t k = 0; k < groups.size(); ++k) {
    streamctl::Result<void> restored;
    if (parallel && !*loads[k]) {
      restored = streamctl::Failure{loads[k]->error()};
    } else if (parallel && **loads[k]) {
      ++o.off_thread_loads;
      restored = (**loads[k])->install();
    } else {
      restored = op.restore_key_group(groups[k], segments.at(groups[k]));
    }
    INFO("key group " << groups[k] << ": " << restored.error());
    REQUIRE(restored.ok());
  }
}

// Feeds steps [from, to) to `runs` (parallelism runs.size()), routed as the data plane would.
void feed(Harness& h, const Scenario& s, std::vector<std::unique_ptr<OperatorRun>>& runs, std::size_t from,
          std::size_t to, std::size_t batch_size, std::size_t& record_no) {
  const int p = static_cast<int>(runs.size());
  const auto max_parallelism = static_cast<std::uint32_t>(h.job().spec.max_parallelism);
  for (std::size_t k = from; k < to; ++k) {
    const Step& step = s.steps[k];
    if (step.is_watermark) {
      for (auto& r : runs)
        r->watermark(step.watermark);
      continue;
    }
    std::vector<Lines> parts(static_cast<std::size_t>(p));
    for (std::size_t i = 0; i < step.lines.size(); ++i) {
      if (s.broadcast) {
        if (step.input == 1) {
          for (auto& part : parts)
            part.push_back(step.lines[i]);
        } else {
          parts[record_no % static_cast<std::size_t>(p)].push_back(step.lines[i]);
        }
        ++record_no;
        continue;
      }
      const int sub = st::subtask_for_key_group(static_cast<std::uint32_t>(step.key_groups[i]), p,
                                                max_parallelism);
      parts[static_cast<std::size_t>(sub)].push_back(step.lines[i]);
    }
    for (int sub = 0; sub < p; ++sub)
      if (!parts[static_cast<std::size_t>(sub)].empty())
        runs[static_cast<std::size_t>(sub)]->records(parts[static_cast<std::size_t>(sub)], step.input,
                                                     batch_size);
  }
}

std::vector<std::unique_ptr<OperatorRun>> make_runs(Harness& h, int p) {
  std::vector<std::unique_ptr<OperatorRun>> runs;
  for (int s = 0; s < p; ++s)
    runs.push_back(std::make_unique<OperatorRun>(h, "op", s, p));
  return runs;
}

void collect(std::vector<std::unique_ptr<OperatorRun>>& runs, Outcome& o) {
  for (auto& r : runs) {
    o.out.insert(o.out.end(), r->out.begin(), r->out.end());
    o.late.insert(o.late.end(), r->late.begin(), r->late.end());
    r->out.clear();
    r->late.clear();
  }
}

Outcome uninterrupted(const Scenario& s, int p, std::size_t batch_size) {
  Harness h(s.toml);
  Scenario sc = s;
  assign_key_groups(h, sc);
  auto runs = make_runs(h, p);
  std::size_t record_no = 0;
  feed(h, sc, runs, 0, sc.steps.size(), batch_size, record_no);
  for (auto& r : runs)
    r->finish();
  Outcome o;
  collect(runs, o);
  o.errors = h.errors.count();
  return o;
}

// Runs the first half at `old_p`, snapshots, restores at `new_p`, runs the second half.
Outcome interrupted(const Scenario& s, int old_p, int new_p, std::size_t batch_size,
                    bool restore_subtask_state = true, bool parallel_load = false) {
  Harness h(s.toml);
  Scenario sc = s;
  assign_key_groups(h, sc);
  const auto max_parallelism = static_cast<std::uint32_t>(h.job().spec.max_parallelism);
  const std::size_t cut = sc.steps.size() / 2;
  Outcome o;
  std::map<std::uint32_t, std::string> segments;
  std::vector<std::string> subtask_states;
  {
    auto runs = make_runs(h, old_p);
    std::size_t record_no = 0;
    feed(h, sc, runs, 0, cut, batch_size, record_no);
    for (int sub = 0; sub < old_p; ++sub) {
      ops::Operator& op = runs[static_cast<std::size_t>(sub)]->op();
      REQUIRE(op.has_state());
      const auto range = st::key_group_range(sub, old_p, max_parallelism);
      for (std::uint32_t kg = range.first; kg < range.end; ++kg) {
        std::string seg;
        op.snapshot_key_group(kg, seg);
        if (seg.empty()) continue;
        o.segment_bytes += seg.size();
        segments[kg] = std::move(seg);
      }
      std::string state;
      op.snapshot_subtask_state(state);
      subtask_states.push_back(std::move(state));
    }
    collect(runs, o); // the first half's output; the old instances go away unfinished
  }
  o.segments = segments.size();
  std::vector<std::string_view> old_states(subtask_states.begin(), subtask_states.end());
  auto runs = make_runs(h, new_p);
  for (int sub = 0; sub < new_p; ++sub) {
    ops::Operator& op = runs[static_cast<std::size_t>(sub)]->op();
    restore_groups(op, st::key_group_range(sub, new_p, max_parallelism), segments, parallel_load, o);
    if (!restore_subtask_state) continue;
    auto restored = op.restore_subtask_state(old_states);
    INFO(restored.error());
    REQUIRE(restored.ok());
  }
  // Record numbers go on where they stopped (the left side of a broadcast join).
  std::size_t record_no = 0;
  for (std::size_t k = 0; k < cut; ++k)
    if (!sc.steps[k].is_watermark) record_no += sc.steps[k].lines.size();
  feed(h, sc, runs, cut, sc.steps.size(), batch_size, record_no);
  for (auto& r : runs)
    r->finish();
  collect(runs, o);
  o.errors = h.errors.count();
  return o;
}

void check_rescales(const Scenario& s) {
  const Outcome reference = uninterrupted(s, 1, 1024);
  REQUIRE(!reference.out.empty());
  const std::pair<int, int> splits[] = {{1, 3}, {3, 2}, {2, 1}, {2, 2}};
  const std::size_t batch_sizes[] = {1024, 7, 1};
  int k = 0;
  for (auto [old_p, new_p] : splits) {
    const std::size_t batch_size = batch_sizes[k++ % 3];
    const bool parallel_load = k % 2 == 0;
    INFO("parallelism " << old_p << " -> " << new_p << ", batch size " << batch_size
                        << (parallel_load ? ", groups loaded in parallel" : ""));
    Outcome got = interrupted(s, old_p, new_p, batch_size, true, parallel_load);
    if (parallel_load && s.loads_off_thread) CHECK(got.off_thread_loads == got.restored_groups);
    // A broadcast join writes no key-group segments, and each subtask reports a late right
    // record (every subtask sees it), so its count of bad records depends on the parallelism.
    if (!s.broadcast) CHECK(got.segments > 0);
    CHECK(sorted(got.out) == sorted(reference.out));
    CHECK(sorted(got.late) == sorted(reference.late));
    if (!s.broadcast) CHECK(got.errors == reference.errors);
  }
}

// --- inputs ----------------------------------------------------------------------------------

std::string key_json(std::mt19937_64& rng, int keys) {
  const int k = static_cast<int>(rng() % static_cast<std::uint64_t>(keys));
  return k % 3 == 0 ? "\"s" + std::to_string(k) + "\"" : std::to_string(k);
}

// Records at times that move forward about 100ms a step with +-300ms of disorder (and 8% up
// to 2s late), and
// watermarks 400ms behind the latest time now and then (so some records come late).
std::vector<Step> random_steps(std::uint64_t seed, int steps, int inputs, const char* key_field[2],
                               const char* value_field[2], int keys = 25) {
  std::mt19937_64 rng(seed);
  std::vector<Step> out;
  std::int64_t max_ts = 0;
  std::int64_t last_w = INT64_MIN;
  for (int k = 0; k < steps; ++k) {
    Step step;
    step.input = inputs == 1 ? 0 : static_cast<int>(rng() % 2);
    const int n = static_cast<int>(rng() % 12);
    for (int i = 0; i < n; ++i) {
      std::int64_t ts = 1000000 + std::int64_t{k} * 100 +
                        static_cast<std::int64_t>(rng() % 601) - 300;
      if (rng() % 100 < 8) ts -= static_cast<std::int64_t>(rng() % 2000); // very late
      max_ts = std::max(max_ts, ts);
      step.lines.push_back("{\"ts\":" + std::to_string(ts) + ",\"" + key_field[step.input] +
                           "\":" + key_json(rng, keys) + ",\"" + value_field[step.input] +
                           "\":" + std::to_string(rng() % 100) + "}");
    }
    out.push_back(std::move(step));
    if (rng() % 10 < 3 && max_ts - 400 > last_w) {
      last_w = max_ts - 400;
      Step w;
      w.is_watermark = true;
      w.watermark = last_w;
      out.push_back(std::move(w));
    }
  }
  return out;
}

std::vector<Step> single_input_steps(std::uint64_t seed, int steps = 300) {
  const char* k[2] = {"k", "k"};
  const char* v[2] = {"v", "v"};
  return random_steps(seed, steps, 1, k, v);
}

std::string window_toml(const std::string& window) {
  return streamctl::testing::single_operator_pipeline(
      "type = \"window\"\nkey = [\"k\"]\nwindow = " + window +
      "\nallowed_lateness = \"300ms\"\nlate_output = \"late\"\n"
      "aggregates = { n = \"count()\", s = \"sum(v)\", lo = \"min(v)\", f = \"first(v)\", "
      "l = \"last(v)\", d = \"count_distinct(v)\" }\n");
}

std::string join_toml(const std::string& body) {
  return "name = \"t\"\n[sources.l]\ntype = \"stdin\"\n[sources.r]\ntype = \"stdin\"\n"
         "[operators.op]\ntype = \"join\"\ninputs = [\"l\", \"r\"]\n"
         "on = { left = \"user\", right = \"uid\" }\n" +
         body + "\n[sinks.out]\ntype = \"stdout\"\ninputs = [\"op\"]\n";
}

Scenario join_scenario(const std::string& body, bool broadcast, std::uint64_t seed) {
  const char* k[2] = {"user", "uid"};
  const char* v[2] = {"a", "b"};
  Scenario s;
  s.toml = join_toml(body + (broadcast ? "strategy = \"broadcast\"\n" : ""));
  s.steps = random_steps(seed, 240, 2, k, v, 15);
  s.broadcast = broadcast;
  return s;
}

// --- corruption ------------------------------------------------------------------------------

// Every truncation of a segment fails naming the operator; random byte flips never crash
// (what they yield, if accepted, must still run to the end).
void fuzz_segment(const std::string& toml, std::uint32_t key_group, const std::string& seg) {
  Harness h(toml);
  for (std::size_t len = 0; len < seg.size(); ++len) {
    OperatorRun run(h, "op", 0, 1);
    auto r = run.op().restore_key_group(key_group, std::string_view(seg).substr(0, len));
    INFO("truncated to " << len << " of " << seg.size() << " bytes");
    REQUIRE_FALSE(r.ok());
    REQUIRE_THAT(r.error(), Catch::Contains("operator 'op'"));
  }
  std::mt19937_64 rng(seg.size());
  int accepted = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::string bad = seg;
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int f = 0; f < flips; ++f)
      bad[rng() % bad.size()] ^= static_cast<char>(1 + rng() % 255);
    OperatorRun run(h, "op", 0, 1);
    auto r = run.op().restore_key_group(key_group, bad);
    if (r.ok()) {
      ++accepted;
      run.finish();
    } else {
      REQUIRE_THAT(r.error(), Catch::Contains("operator 'op'"));
    }
  }
  // Garbage of every length.
  for (int trial = 0; trial < 200; ++trial) {
    std::string junk(rng() % 64, '\0');
    for (auto& c : junk)
      c = static_cast<char>(rng());
    if (trial % 2 == 0 && !junk.empty()) junk[0] = 1; // the right version byte
    OperatorRun run(h, "op", 0, 1);
    auto r = run.op().restore_key_group(key_group, junk);
    if (r.ok()) run.finish();
  }
  SUCCEED("flipped segments accepted: " << accepted);
}

// Truncations of a subtask state fail (the empty string means "none" and is fine); flips never
// crash.
void fuzz_subtask_state(const std::string& toml, const std::string& state) {
  Harness h(toml);
  for (std::size_t len = 1; len < state.size(); ++len) {
    OperatorRun run(h, "op", 0, 1);
    std::vector<std::string_view> olds = {std::string_view(state).substr(0, len)};
    auto r = run.op().restore_subtask_state(olds);
    INFO("truncated to " << len << " of " << state.size() << " bytes");
    REQUIRE_FALSE(r.ok());
    REQUIRE_THAT(r.error(), Catch::Contains("operator 'op'"));
  }
  std::mt19937_64 rng(state.size());
  for (int trial = 0; trial < 300; ++trial) {
    std::string bad = state;
    bad[rng() % bad.size()] ^= static_cast<char>(1 + rng() % 255);
    OperatorRun run(h, "op", 0, 1);
    std::vector<std::string_view> olds = {bad};
    if (run.op().restore_subtask_state(olds).ok()) run.finish();
  }
}

// The segments and subtask state of a run at parallelism 1 over `steps` cut in half.
struct Snapshot {
  std::map<std::uint32_t, std::string> segments;
  std::string subtask_state;
};

Snapshot snapshot_half(const Scenario& s) {
  Harness h(s.toml);
  Scenario sc = s;
  assign_key_groups(h, sc);
  auto runs = make_runs(h, 1);
  std::size_t record_no = 0;
  feed(h, sc, runs, 0, sc.steps.size() / 2, 1024, record_no);
  Snapshot snap;
  for (std::uint32_t kg = 0; kg < 128; ++kg) {
    std::string seg;
    runs[0]->op().snapshot_key_group(kg, seg);
    if (!seg.empty()) snap.segments[kg] = std::move(seg);
  }
  runs[0]->op().snapshot_subtask_state(snap.subtask_state);
  return snap;
}

// A segment of middling size (every byte gets truncated).
std::pair<std::uint32_t, std::string> some_segment(const Snapshot& snap) {
  std::vector<std::pair<std::uint32_t, std::string>> all(snap.segments.begin(),
                                                         snap.segments.end());
  REQUIRE(!all.empty());
  std::sort(all.begin(), all.end(),
            [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
  return all[all.size() / 2];
}

void check_corruption(const Scenario& s, bool has_subtask_state) {
  Snapshot snap = snapshot_half(s);
  auto [kg, seg] = some_segment(snap);
  fuzz_segment(s.toml, kg, seg);
  if (has_subtask_state) {
    REQUIRE(!snap.subtask_state.empty());
    fuzz_subtask_state(s.toml, snap.subtask_state);
  }
}

} // namespace

// --- rescale round trips ---------------------------------------------------------------------

TEST_CASE("reduce state survives a rescale by key group", "[restore][reduce]") {
  for (std::uint64_t seed : {1u, 2u}) {
    Scenario s;
    s.toml = streamctl::testing::single_operator_pipeline(
        "type = \"reduce\"\nkey = [\"k\"]\naggregates = { n = \"count()\", s = \"sum(v)\", "
        "d = \"count_distinct(v)\", t = \"top_k(v, 2)\", a = \"avg(v)\" }\n");
    s.steps = single_input_steps(seed);
    s.loads_off_thread = true;
    check_rescales(s);
  }
}

TEST_CASE("tumbling window state survives a rescale", "[restore][window]") {
  for (std::uint64_t seed : {3u, 4u}) {
    Scenario s{window_toml("{ kind = \"tumbling\", size = \"1s\" }"), single_input_steps(seed)};
    s.loads_off_thread = true;
    check_rescales(s);
  }
}

TEST_CASE("sliding window state survives a rescale", "[restore][window]") {
  for (std::uint64_t seed : {5u, 6u}) {
    Scenario s{window_toml("{ kind = \"sliding\", size = \"2s\", slide = \"500ms\" }"),
               single_input_steps(seed)};
    s.loads_off_thread = true;
    check_rescales(s);
  }
}

TEST_CASE("session window state survives a rescale", "[restore][window]") {
  for (std::uint64_t seed : {7u, 8u}) {
    Scenario s{window_toml("{ kind = \"session\", gap = \"700ms\" }"), single_input_steps(seed)};
    s.loads_off_thread = true;
    check_rescales(s);
  }
}

TEST_CASE("a window needs its watermark back: without the subtask state the output differs",
          "[restore][window]") {
  // The control for the choice to checkpoint the watermark as subtask state: a restored window
  // that starts from no watermark takes records that are late, and misses the updates of
  // windows that fired before the checkpoint.
  for (const char* window : {"{ kind = \"tumbling\", size = \"1s\" }",
                             "{ kind = \"session\", gap = \"700ms\" }"}) {
    // (Only records between the restore and the next watermark can tell: try a few inputs.)
    int differ = 0;
    for (std::uint64_t seed = 41; seed < 49; ++seed) {
      Scenario s{window_toml(window), single_input_steps(seed)};
      const Outcome reference = uninterrupted(s, 1, 1024);
      REQUIRE(!reference.late.empty());
      const Outcome with = interrupted(s, 2, 3, 1024);
      CHECK(sorted(with.out) == sorted(reference.out));
      CHECK(sorted(with.late) == sorted(reference.late));
      const Outcome without = interrupted(s, 2, 3, 1024, false);
      if (sorted(without.out) != sorted(reference.out) ||
          sorted(without.late) != sorted(reference.late))
        ++differ;
    }
    INFO(window);
    CHECK(differ > 0);
  }
}

TEST_CASE("exact dedup state survives a rescale", "[restore][dedup]") {
  for (std::uint64_t seed : {9u, 10u}) {
    Scenario s{streamctl::testing::single_operator_pipeline(
                   "type = \"dedup\"\nkey = [\"k\"]\nwithin = \"700ms\"\n"),
               single_input_steps(seed)};
    s.loads_off_thread = true;
    check_rescales(s);
  }
}

TEST_CASE("bloom dedup state survives a rescale", "[restore][dedup]") {
  // Generations advance only by watermarks (each generation's records come after the watermark
  // that opens it), so every subtask holds the same generations at any parallelism.
  for (std::uint64_t seed : {11u, 12u}) {
    std::mt19937_64 rng(seed);
    Scenario s;
    s.toml = streamctl::testing::single_operator_pipeline(
        "type = \"dedup\"\nkey = [\"k\"]\nwithin = \"1s\"\nmethod = \"bloom\"\n"
        "expected_keys = 2000\n");
    for (int g = 1000; g < 1030; ++g) {
      Step w;
      w.is_watermark = true;
      w.watermark = std::int64_t{g} * 1000;
      s.steps.push_back(w);
      for (int b = 0; b < 4; ++b) {
        Step step;
        for (int i = 0; i < 8; ++i)
          step.lines.push_back("{\"ts\":" + std::to_string(std::int64_t{g} * 1000 + b * 250 +
                                                           static_cast<std::int64_t>(rng() % 250)) +
                               ",\"k\":" + key_json(rng, 40) + ",\"v\":1}");
        s.steps.push_back(std::move(step));
      }
    }
    check_rescales(s);
  }
}

TEST_CASE("window join state survives a rescale", "[restore][join]") {
  check_rescales(join_scenario("window = { kind = \"tumbling\", size = \"1s\" }\n", false, 13));
  check_rescales(join_scenario(
      "window = { kind = \"sliding\", size = \"2s\", slide = \"500ms\" }\n", false, 14));
}

TEST_CASE("interval join state survives a rescale", "[restore][join]") {
  check_rescales(
      join_scenario("interval = { lower = \"-500ms\", upper = \"300ms\" }\n", false, 15));
}

TEST_CASE("broadcast join state is subtask state and survives a rescale", "[restore][join]") {
  check_rescales(join_scenario("window = { kind = \"tumbling\", size = \"1s\" }\n", true, 16));
  check_rescales(
      join_scenario("interval = { lower = \"-500ms\", upper = \"300ms\" }\n", true, 17));
  // Nothing is written by key group.
  Scenario s =
      join_scenario("interval = { lower = \"-500ms\", upper = \"300ms\" }\n", true, 18);
  Snapshot snap = snapshot_half(s);
  CHECK(snap.segments.empty());
  CHECK(!snap.subtask_state.empty());
}

// --- corrupt, truncated and mismatched state -------------------------------------------------

TEST_CASE("restore refuses truncated and corrupt segments cleanly", "[restore][corrupt]") {
  SECTION("reduce") {
    Scenario s;
    s.toml = streamctl::testing::single_operator_pipeline(
        "type = \"reduce\"\nkey = [\"k\"]\nttl = \"1h\"\naggregates = { n = \"count()\", "
        "d = \"count_distinct(v)\", t = \"top_k(v, 2)\" }\n");
    s.steps = single_input_steps(21);
    check_corruption(s, false);
  }
  SECTION("tumbling") {
    check_corruption({window_toml("{ kind = \"tumbling\", size = \"1s\" }"),
                      single_input_steps(22)},
                     true);
  }
  SECTION("sliding") {
    check_corruption({window_toml("{ kind = \"sliding\", size = \"2s\", slide = \"500ms\" }"),
                      single_input_steps(23)},
                     true);
  }
  SECTION("session") {
    check_corruption({window_toml("{ kind = \"session\", gap = \"700ms\" }"),
                      single_input_steps(24)},
                     true);
  }
  SECTION("dedup exact") {
    check_corruption({streamctl::testing::single_operator_pipeline(
                          "type = \"dedup\"\nkey = [\"k\"]\nwithin = \"700ms\"\n"),
                      single_input_steps(25)},
                     false);
  }
  SECTION("dedup bloom") {
    check_corruption({streamctl::testing::single_operator_pipeline(
                          "type = \"dedup\"\nkey = [\"k\"]\nwithin = \"1s\"\nmethod = "
                          "\"bloom\"\nexpected_keys = 200\n"),
                      single_input_steps(26)},
                     true);
  }
  SECTION("window join") {
    check_corruption(join_scenario("window = { kind = \"tumbling\", size = \"1s\" }\n", false, 27),
                     true);
  }
  SECTION("interval join") {
    check_corruption(
        join_scenario("interval = { lower = \"-500ms\", upper = \"300ms\" }\n", false, 28), true);
  }
  SECTION("broadcast join") {
    Scenario s = join_scenario("window = { kind = \"tumbling\", size = \"1s\" }\n", true, 29);
    Snapshot snap = snapshot_half(s);
    REQUIRE(!snap.subtask_state.empty());
    fuzz_subtask_state(s.toml, snap.subtask_state);
  }
}

TEST_CASE("restore refuses the state of another operator kind or aggregates list",
          "[restore][corrupt]") {
  const std::string reduce_count = streamctl::testing::single_operator_pipeline(
      "type = \"reduce\"\nkey = [\"k\"]\naggregates = { n = \"count()\" }\n");
  const std::string reduce_sum = streamctl::testing::single_operator_pipeline(
      "type = \"reduce\"\nkey = [\"k\"]\naggregates = { n = \"sum(v)\" }\n");
  const std::string reduce_two = streamctl::testing::single_operator_pipeline(
      "type = \"reduce\"\nkey = [\"k\"]\naggregates = { n = \"count()\", s = \"sum(v)\" }\n");
  const std::string tumbling = window_toml("{ kind = \"tumbling\", size = \"1s\" }");
  const std::string tumbling_2s = window_toml("{ kind = \"tumbling\", size = \"2s\" }");
  const std::string session = window_toml("{ kind = \"session\", gap = \"700ms\" }");
  const std::string dedup = streamctl::testing::single_operator_pipeline(
      "type = \"dedup\"\nkey = [\"k\"]\nwithin = \"700ms\"\n");
  const std::string bloom = streamctl::testing::single_operator_pipeline(
      "type = \"dedup\"\nkey = [\"k\"]\nwithin = \"700ms\"\nmethod = \"bloom\"\n");
  const std::string join = join_toml("window = { kind = \"tumbling\", size = \"1s\" }\n");
  const std::string interval = join_toml("interval = { lower = \"-1s\", upper = \"1s\" }\n");

  auto first_segment = [](const std::string& toml, bool two_inputs) {
    Scenario s{toml, {}};
    if (two_inputs) {
      const char* k[2] = {"user", "uid"};
      const char* v[2] = {"a", "b"};
      s.steps = random_steps(31, 60, 2, k, v, 5);
    } else {
      s.steps = single_input_steps(31, 60);
    }
    Snapshot snap = snapshot_half(s);
    REQUIRE(!snap.segments.empty());
    return *snap.segments.begin();
  };
  auto refuses = [](const std::string& toml, const std::pair<std::uint32_t, std::string>& seg,
                    const std::string& why) {
    Harness h(toml);
    OperatorRun run(h, "op", 0, 1);
    auto r = run.op().restore_key_group(seg.first, seg.second);
    INFO(r.error());
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error(), Catch::Contains("operator 'op'") && Catch::Contains(why));
  };

  const auto reduce_seg = first_segment(reduce_count, false);
  const auto tumbling_seg = first_segment(tumbling, false);
  const auto session_seg = first_segment(session, false);
  const auto dedup_seg = first_segment(dedup, false);
  const auto bloom_seg = first_segment(bloom, false);
  const auto join_seg = first_segment(join, true);

  refuses(reduce_sum, reduce_seg, "aggregates");
  refuses(reduce_two, reduce_seg, "aggregates");
  refuses(tumbling, reduce_seg, "another kind of operator");
  refuses(session, tumbling_seg, "another kind of operator");
  refuses(tumbling, session_seg, "another kind of operator");
  refuses(tumbling_2s, tumbling_seg, "this node's are");
  refuses(reduce_count, tumbling_seg, "another kind of operator");
  refuses(bloom, dedup_seg, "another kind of operator");
  refuses(dedup, bloom_seg, "another kind of operator");
  refuses(join, dedup_seg, "another kind of operator");
  refuses(interval, join_seg, "window join");
  refuses(reduce_count, join_seg, "another kind of operator");

  // A segment offered to a subtask that does not own the group.
  {
    Harness h(reduce_count);
    OperatorRun run(h, "op", 0, 2); // owns [0, 64)
    auto r = run.op().restore_key_group(100, reduce_seg.second);
    CHECK_FALSE(r.ok());
    CHECK_THAT(r.error(), Catch::Contains("not a key group of this subtask"));
  }
  // A segment filed under the wrong key group.
  {
    Harness h(reduce_count);
    OperatorRun run(h, "op", 0, 1);
    auto r = run.op().restore_key_group((reduce_seg.first + 1) % 128, reduce_seg.second);
    CHECK_FALSE(r.ok());
    CHECK_THAT(r.error(), Catch::Contains("another key group"));
  }
  // Twice the same group.
  {
    Harness h(reduce_count);
    OperatorRun run(h, "op", 0, 1);
    REQUIRE(run.op().restore_key_group(reduce_seg.first, reduce_seg.second).ok());
    CHECK_FALSE(run.op().restore_key_group(reduce_seg.first, reduce_seg.second).ok());
  }
  // Window subtask state into a join, and a broadcast join's into a hash join.
  {
    Harness hw(tumbling);
    OperatorRun w(hw, "op", 0, 1);
    std::string window_state;
    w.op().snapshot_subtask_state(window_state);
    Harness hj(join);
    OperatorRun j(hj, "op", 0, 1);
    std::vector<std::string_view> olds = {window_state};
    auto r = j.op().restore_subtask_state(olds);
    CHECK_FALSE(r.ok());
    CHECK_THAT(r.error(), Catch::Contains("operator 'op'"));
  }
}

// --- size ------------------------------------------------------------------------------------

TEST_CASE("snapshot bytes per key of a count aggregate over 1,000,000 keys",
          "[restore_size][.]") {
  Harness h(streamctl::testing::single_operator_pipeline(
      "type = \"reduce\"\nkey = [\"k\"]\naggregates = { n = \"count()\" }\n"));
  OperatorRun run(h, "op", 0, 1);
  const st::FieldId k = h.names().intern("k");
  const int keys = 1000000;
  st::RecordBuilder builder;
  for (int at = 0; at < keys; at += 4096) {
    st::Batch in;
    for (int i = at; i < std::min(keys, at + 4096); ++i) {
      builder.reset();
      builder.append(k, st::Value::string(in.copy_string("user" + std::to_string(i))));
      builder.finish(in);
    }
    st::Batch out;
    run.op().process(in, out);
  }
  std::size_t bytes = 0;
  std::size_t segments = 0;
  const auto start = std::chrono::steady_clock::now();
  std::map<std::uint32_t, std::string> all;
  for (std::uint32_t kg = 0; kg < 128; ++kg) {
    std::string seg;
    run.op().snapshot_key_group(kg, seg);
    bytes += seg.size();
    segments += seg.empty() ? 0 : 1;
    all[kg] = std::move(seg);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double per_key = static_cast<double>(bytes) / keys;
  WARN("count() over " << keys << " keys (\"user0\"..\"user999999\"): " << bytes
                       << " snapshot bytes in " << segments << " segments, " << per_key
                       << " bytes per key, written in " << seconds << " s (Debug)");
  CHECK(segments == 128);
  CHECK(per_key < 30.0);
  // And it restores.
  OperatorRun back(h, "op", 0, 1);
  for (auto& [kg, seg] : all)
    REQUIRE(back.op().restore_key_group(kg, seg).ok());
  std::size_t again = 0;
  for (std::uint32_t kg = 0; kg < 128; ++kg) {
    std::string seg;
    back.op().snapshot_key_group(kg, seg);
    again += seg.size();
  }
  CHECK(again == bytes);
}

// --- incremental checkpoints -----------------------------------------------------------------

namespace {

// Drives `s` at parallelism 2 and, every few steps, takes the operator's changed key groups as
// an incremental checkpoint would: every group it does not name must snapshot to the bytes it
// had at the last checkpoint, or a restore from the deltas would bring it back stale.
void check_changed_groups_cover_changes(const Scenario& s) {
  Harness h(s.toml);
  Scenario sc = s;
  assign_key_groups(h, sc);
  const auto max_parallelism = static_cast<std::uint32_t>(h.job().spec.max_parallelism);
  auto runs = make_runs(h, 2);
  std::map<std::uint32_t, std::string> last; // by key group: the bytes at the last checkpoint
  std::size_t record_no = 0, unchanged = 0, changed = 0;
  for (std::size_t at = 0; at < sc.steps.size(); at += 7) {
    feed(h, sc, runs, at, std::min(sc.steps.size(), at + 7), 5, record_no);
    for (int sub = 0; sub < 2; ++sub) {
      ops::Operator& op = runs[static_cast<std::size_t>(sub)]->op();
      std::vector<std::uint32_t> taken;
      REQUIRE(op.take_changed_key_groups(taken));
      const std::set<std::uint32_t> named(taken.begin(), taken.end());
      const auto range = st::key_group_range(sub, 2, max_parallelism);
      for (std::uint32_t kg = range.first; kg < range.end; ++kg) {
        std::string bytes;
        op.snapshot_key_group(kg, bytes);
        if (named.count(kg)) {
          ++changed;
        } else {
          INFO("key group " << kg << " changed, but the operator did not say so (after step " << at << ")");
          REQUIRE(bytes == last[kg]);
          ++unchanged;
        }
        last[kg] = std::move(bytes);
      }
    }
  }
  // The check means something only when both happen.
  CHECK(changed > 0);
  CHECK(unchanged > changed);
}

} // namespace

TEST_CASE("a tumbling window names every key group whose state changed since it was last asked",
          "[restore][window][incremental]") {
  for (std::uint64_t seed : {11u, 12u})
    check_changed_groups_cover_changes(
        Scenario{window_toml("{ kind = \"tumbling\", size = \"1s\" }"), single_input_steps(seed)});
}

TEST_CASE("a sliding window names every key group whose state changed since it was last asked",
          "[restore][window][incremental]") {
  for (std::uint64_t seed : {13u, 14u})
    check_changed_groups_cover_changes(Scenario{
        window_toml("{ kind = \"sliding\", size = \"2s\", slide = \"500ms\" }"), single_input_steps(seed)});
}

TEST_CASE("a reduce names every key group whose state changed since it was last asked",
          "[restore][reduce][incremental]") {
  for (std::uint64_t seed : {15u, 16u}) {
    Scenario s;
    s.toml = streamctl::testing::single_operator_pipeline(
        "type = \"reduce\"\nkey = [\"k\"]\naggregates = { n = \"count()\", s = \"sum(v)\", "
        "d = \"count_distinct(v)\" }\n");
    s.steps = single_input_steps(seed);
    check_changed_groups_cover_changes(s);
  }
}

TEST_CASE("a session window names every key group whose state changed since it was last asked",
          "[restore][window][incremental]") {
  for (std::uint64_t seed : {17u, 18u})
    check_changed_groups_cover_changes(
        Scenario{window_toml("{ kind = \"session\", gap = \"700ms\" }"), single_input_steps(seed)});
}

TEST_CASE("an exact dedup names every key group whose state changed since it was last asked",
          "[restore][dedup][incremental]") {
  for (std::uint64_t seed : {19u, 20u})
    check_changed_groups_cover_changes(Scenario{
        streamctl::testing::single_operator_pipeline("type = \"dedup\"\nkey = [\"k\"]\nwithin = \"700ms\"\n"),
        single_input_steps(seed)});
}

TEST_CASE("a window join and an interval join name every key group whose state changed",
          "[restore][join][incremental]") {
  check_changed_groups_cover_changes(join_scenario("window = { kind = \"tumbling\", size = \"1s\" }\n", false, 21));
  check_changed_groups_cover_changes(
      join_scenario("window = { kind = \"sliding\", size = \"2s\", slide = \"500ms\" }\n", false, 22));
  check_changed_groups_cover_changes(
      join_scenario("interval = { lower = \"-500ms\", upper = \"300ms\" }\n", false, 23));
}
