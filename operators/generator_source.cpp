#include "operators/generator_source.hpp"

#include <charconv>
#include <chrono>
#include <cstring>

#include "pipeline/spec/units.hpp"

namespace streamctl::operators {

namespace {

using state::Value;

// splitmix64: a fast, well-mixed pure function of its input, stable across builds.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

enum class Profile { Counter, Clicks };

class GeneratorSource final : public Source {
public:
  GeneratorSource(const pipeline::NodeSpec& node, state::FieldNames& names) {
    std::string profile = node.config["profile"].value_or(std::string("counter"));
    profile_ = profile == "clicks" ? Profile::Clicks : Profile::Counter;
    if (auto c = node.config["count"].value<std::int64_t>()) {
      bounded_ = true;
      count_ = static_cast<std::uint64_t>(std::max<std::int64_t>(0, *c));
    }
    rate_ = node.config["rate"].value_or(0.0);
    seed_ = static_cast<std::uint64_t>(node.config["seed"].value_or(std::int64_t{0}));
    start_time_ = node.config["start_time"].value_or(std::int64_t{0});
    interval_ms_ = pipeline::duration_ms_or(node.config.get("interval"), 1);
    users_ = static_cast<std::uint64_t>(std::max<std::int64_t>(1, node.config["users"].value_or(std::int64_t{1000})));
    pages_ = static_cast<std::uint64_t>(std::max<std::int64_t>(1, node.config["pages"].value_or(std::int64_t{100})));
    seq_ = names.intern("seq");
    ts_ = names.intern("ts");
    user_ = names.intern("user");
    page_ = names.intern("page");
    status_ = names.intern("status");
    bytes_ = names.intern("bytes");
  }

  void open(OperatorContext& ctx) override {
    Source::open(ctx);
    next_ = static_cast<std::uint64_t>(ctx.subtask);
    step_ = static_cast<std::uint64_t>(ctx.parallelism);
    started_ = std::chrono::steady_clock::now();
  }

  SourceStatus poll(state::Batch& out, std::size_t max_records) override {
    std::uint64_t n = max_records;
    if (rate_ > 0) {
      double per_subtask = rate_ / static_cast<double>(step_);
      double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
      auto allowed = static_cast<std::uint64_t>(elapsed * per_subtask) + 1;
      n = allowed > emitted_ ? std::min<std::uint64_t>(n, allowed - emitted_) : 0;
    }
    std::size_t made = 0;
    for (; made < n; ++made) {
      if (bounded_ && next_ >= count_) break;
      make_record(next_, out);
      next_ += step_;
    }
    emitted_ += made;
    if (made > 0) return SourceStatus::Data;
    return bounded_ && next_ >= count_ ? SourceStatus::End : SourceStatus::Idle;
  }

private:
  void make_record(std::uint64_t n, state::Batch& out) {
    std::int64_t ts = start_time_ + static_cast<std::int64_t>(n) * interval_ms_;
    builder_.reset();
    if (profile_ == Profile::Counter) {
      builder_.append(seq_, Value::integer(static_cast<std::int64_t>(n)));
      builder_.append(ts_, Value::integer(ts));
    } else {
      std::uint64_t r = mix(seed_ * 0x100000001b3ULL ^ n);
      builder_.append(ts_, Value::integer(ts));
      builder_.append(user_, Value::string(numbered(out, "u", r % users_)));
      builder_.append(page_, Value::string(numbered(out, "/p/", (r >> 20) % pages_)));
      std::uint64_t s = (r >> 40) % 100;
      builder_.append(status_, Value::integer(s < 90 ? 200 : s < 97 ? 404 : 500));
      builder_.append(bytes_, Value::integer(static_cast<std::int64_t>(100 + (r >> 8) % 9900)));
    }
    builder_.finish(out);
  }

  static std::string_view numbered(state::Batch& out, std::string_view prefix, std::uint64_t k) {
    char buf[32];
    std::memcpy(buf, prefix.data(), prefix.size());
    auto [end, ec] = std::to_chars(buf + prefix.size(), buf + sizeof buf, k);
    return out.copy_string(std::string_view(buf, static_cast<std::size_t>(end - buf)));
  }

  Profile profile_;
  bool bounded_ = false;
  std::uint64_t count_ = 0;
  double rate_ = 0;
  std::uint64_t seed_ = 0;
  std::int64_t start_time_ = 0;
  std::int64_t interval_ms_ = 1;
  std::uint64_t users_ = 1000;
  std::uint64_t pages_ = 100;
  std::uint64_t next_ = 0;
  std::uint64_t step_ = 1;
  std::uint64_t emitted_ = 0;
  std::chrono::steady_clock::time_point started_;
  state::FieldId seq_, ts_, user_, page_, status_, bytes_;
  state::RecordBuilder builder_;
};

} // namespace

pipeline::NodeTypeSchema generator_source_schema() {
  using pipeline::KeySchema;
  using pipeline::KeyType;
  return pipeline::NodeTypeSchema{
      "generator",
      {
          KeySchema{"profile", KeyType::Enum, false, {"counter", "clicks"}, {}, "what to generate"},
          KeySchema{"count", KeyType::Int, false, {}, {}, "records in all (absent: unbounded)"},
          KeySchema{"rate", KeyType::Float, false, {}, {}, "records per second for the whole source"},
          KeySchema{"seed", KeyType::Int, false, {}, {}, "seed of the pseudo-random fields"},
          KeySchema{"start_time", KeyType::Int, false, {}, {}, "ts of record 0, epoch ms"},
          KeySchema{"interval", KeyType::Duration, false, {}, {}, "ts step between records"},
          KeySchema{"users", KeyType::Int, false, {}, {}, "clicks: distinct users"},
          KeySchema{"pages", KeyType::Int, false, {}, {}, "clicks: distinct pages"},
      }};
}

std::unique_ptr<Source> make_generator_source(const pipeline::PipelineSpec&, const pipeline::NodeSpec& node,
                                              state::FieldNames& names) {
  return std::make_unique<GeneratorSource>(node, names);
}

} // namespace streamctl::operators
