#include "operators/shed.hpp"

#include <cmath>
#include <cstring>
#include <optional>

#include "operators/config_problems.hpp"
#include "operators/splitmix.hpp"
#include "pipeline/spec/lint.hpp"

namespace streamctl::operators {

namespace {

struct ShedConfig {
  double drop_probability = 1.0;
  std::optional<std::int64_t> target_latency_ms; // absent: shed always
  std::uint64_t seed = 0;
};

class Shed final : public Operator {
public:
  explicit Shed(ShedConfig config) : config_(config) {
    // A record is dropped when its 64-bit draw is below the threshold; probability 1 drops
    // every record (the threshold cannot be 2^64), probability 0 none.
    drop_all_ = config_.drop_probability >= 1.0;
    threshold_ = drop_all_ ? UINT64_MAX
                           : static_cast<std::uint64_t>(std::ldexp(config_.drop_probability, 64));
  }

  void open(OperatorContext& ctx) override {
    Operator::open(ctx);
    stream_ = splitmix64(config_.seed ^ splitmix64(static_cast<std::uint64_t>(ctx.subtask) + 1));
  }

  void process(const state::Batch& in, state::Batch& out) override {
    out.retain_memory_of(in);
    if (config_.target_latency_ms) update_lag(ctx_.now_ms());
    if (!shedding_now()) {
      for (const auto& record : in) out.add_shared(record);
      position_ += in.size();
      return;
    }
    for (const auto& record : in) {
      const bool drop = drop_all_ || splitmix64(stream_ + position_ * kSplitmixGamma) < threshold_;
      ++position_;
      if (!drop) out.add_shared(record);
    }
  }

  void on_watermark(std::int64_t watermark, state::Batch&) override {
    // The end of input (+infinity) is no sign of keeping up or lagging.
    if (watermark != INT64_MAX) watermark_ = std::max(watermark_, watermark);
    if (config_.target_latency_ms) update_lag(ctx_.now_ms());
  }

  // The position in the input is the state: a restore at the same parallelism draws on where
  // the checkpoint left off, so a replay drops the records the first attempt dropped.
  //   u8 version 1, u32 subtask, u32 parallelism, u64 position (little-endian)
  bool has_state() const override { return true; }
  void snapshot_subtask_state(std::string& out) const override {
    out.push_back(1);
    put(out, static_cast<std::uint32_t>(ctx_.subtask));
    put(out, static_cast<std::uint32_t>(ctx_.parallelism));
    put(out, position_);
  }
  Result<void> restore_subtask_state(const std::vector<std::string_view>& old) override {
    std::uint64_t sum = 0;
    for (std::size_t k = 0; k < old.size(); ++k) {
      if (old[k].empty()) continue;
      if (old[k].size() != 17 || old[k][0] != 1)
        return fail("shed state of subtask " + std::to_string(k) + " is not version 1");
      std::uint64_t position;
      std::memcpy(&position, old[k].data() + 9, 8);
      sum += position;
      if (old.size() == static_cast<std::size_t>(ctx_.parallelism) &&
          k == static_cast<std::size_t>(ctx_.subtask))
        position_ = position;
    }
    // At another parallelism the streams start afresh, past every position used before.
    if (old.size() != static_cast<std::size_t>(ctx_.parallelism)) position_ = sum;
    return {};
  }

  bool shedding_now() const { return !config_.target_latency_ms || lagging_; }

private:
  template <typename T> static void put(std::string& out, T v) {
    char bytes[sizeof v];
    std::memcpy(bytes, &v, sizeof v);
    out.append(bytes, sizeof v);
  }

  void update_lag(std::int64_t now) {
    lagging_ = watermark_ != INT64_MIN && now - watermark_ > *config_.target_latency_ms;
  }

  ShedConfig config_;
  bool drop_all_ = false;
  std::uint64_t threshold_ = 0;
  std::uint64_t stream_ = 0;
  std::uint64_t position_ = 0; // records this subtask has read
  std::int64_t watermark_ = INT64_MIN;
  bool lagging_ = false;
};

// Projection: shed reads nothing itself; records pass whole.
std::vector<pipeline::FieldSet> shed_reads(const pipeline::PipelineSpec&,
                                           const pipeline::NodeSpec& node,
                                           const pipeline::FieldSet& main,
                                           const pipeline::FieldSet&) {
  return std::vector<pipeline::FieldSet>(node.inputs.size(), main);
}

} // namespace

pipeline::NodeTypeSchema shed_schema() {
  using pipeline::KeySchema;
  using pipeline::KeyType;
  pipeline::NodeTypeSchema schema{
      "shed",
      {
          KeySchema{"drop_probability", KeyType::Float, false, {}, {},
                    "share of records dropped, in [0, 1] (with target_latency: while lagging; default 1)"},
          KeySchema{"target_latency", KeyType::Duration, false, {}, {},
                    "shed only while the watermark lags the wall clock by more than this"},
          KeySchema{"seed", KeyType::Int, false, {}, {}, "seed of the choice of dropped records"},
      }};
  schema.read_fields = shed_reads;
  return schema;
}

std::unique_ptr<Operator> make_shed(const pipeline::PipelineSpec& spec,
                                    const pipeline::NodeSpec& node, state::FieldNames&) {
  ConfigProblems problems(spec, node);
  ShedConfig config;
  const bool has_target = node.config.contains("target_latency");
  if (const toml::node* p = node.config.get("drop_probability")) {
    std::optional<double> v = p->value<double>();
    if (!v || !(*v >= 0.0 && *v <= 1.0))
      problems.add("drop_probability", "'drop_probability' must be a number in [0, 1]");
    else
      config.drop_probability = *v;
  } else if (!has_target) {
    problems.add("type", "needs 'drop_probability' (a share of records to drop) or "
                         "'target_latency' (shed only while the job lags more than it)");
  }
  if (has_target) {
    const std::int64_t ms = pipeline::duration_ms_or(node.config.get("target_latency"), -1);
    if (ms < 0)
      problems.add("target_latency", "'target_latency' must be a duration such as \"200ms\"");
    else
      config.target_latency_ms = ms;
    if (!pipeline::nodes_with_event_time(spec)[spec.index_of(node)])
      problems.add("target_latency",
                   "'target_latency' measures how far the watermark lags the wall clock, and no "
                   "source upstream sets 'event_time'");
  }
  if (const toml::node* s = node.config.get("seed")) {
    if (auto v = s->value<std::int64_t>())
      config.seed = static_cast<std::uint64_t>(*v);
    else
      problems.add("seed", "'seed' must be an integer");
  }
  problems.throw_if_any();
  return std::make_unique<Shed>(config);
}

} // namespace streamctl::operators
