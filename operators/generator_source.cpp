#include "operators/generator_source.hpp"

#include <charconv>
#include <chrono>
#include <cstring>
#include <optional>

#include "operators/nexmark.hpp"
#include "pipeline/spec/units.hpp"
#include "state/error.hpp"

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

enum class Profile { Counter, Clicks, Nexmark };

class GeneratorSource final : public Source {
public:
  // `only`: for nexmark, the one kind of event to emit (absent: all), numbered as in the full
  // stream.
  GeneratorSource(const pipeline::NodeSpec& node, state::FieldNames& names,
                  std::optional<NexmarkKind> only)
      : only_(only) {
    std::string profile = node.config["profile"].value_or(std::string("counter"));
    profile_ = profile == "clicks"    ? Profile::Clicks
               : profile == "nexmark" ? Profile::Nexmark
                                      : Profile::Counter;
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
    if (profile_ == Profile::Nexmark) nexmark_fields_.emplace(names);
  }

  void open(OperatorContext& ctx) override {
    Source::open(ctx);
    next_ = static_cast<std::uint64_t>(ctx.subtask);
    step_ = static_cast<std::uint64_t>(ctx.parallelism);
    started_ = std::chrono::steady_clock::now();
    // The kind of event N repeats with N every 50, so this subtask's events (next_ + k * step_)
    // hold the wanted kind within any 50 in a row, or never (subtask 1 of 50 makes only
    // auctions): then it ends at once rather than scan for ever.
    never_ = only_.has_value();
    for (std::uint64_t k = 0; k < 50 && never_; ++k)
      never_ = nexmark_kind(next_ + k * step_) != *only_;
  }

  SourceStatus poll(state::Batch& out, std::size_t max_records) override {
    if (never_) return SourceStatus::End;
    std::uint64_t n = max_records;
    if (rate_ > 0) {
      double per_subtask = rate_ / static_cast<double>(step_);
      double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
      auto allowed = static_cast<std::uint64_t>(elapsed * per_subtask) + 1;
      n = allowed > emitted_ ? std::min<std::uint64_t>(n, allowed - emitted_) : 0;
    }
    std::size_t made = 0;
    while (made < n) {
      if (bounded_ && next_ >= count_) break;
      std::uint64_t k = next_;
      next_ += step_;
      if (only_ && nexmark_kind(k) != *only_) continue;
      make_record(k, out);
      ++made;
    }
    emitted_ += made;
    if (made > 0) return SourceStatus::Data;
    return bounded_ && next_ >= count_ ? SourceStatus::End : SourceStatus::Idle;
  }

private:
  void make_record(std::uint64_t n, state::Batch& out) {
    if (profile_ == Profile::Nexmark) {
      make_nexmark_event(seed_, n, NexmarkClock{start_time_, interval_ms_}, *nexmark_fields_,
                         builder_, out);
      return;
    }
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
  std::optional<NexmarkKind> only_;
  bool never_ = false;
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
  std::optional<NexmarkFields> nexmark_fields_; // for profile nexmark
  state::RecordBuilder builder_;
};

} // namespace

pipeline::NodeTypeSchema generator_source_schema() {
  using pipeline::KeySchema;
  using pipeline::KeyType;
  return pipeline::NodeTypeSchema{
      "generator",
      {
          KeySchema{"profile", KeyType::Enum, false, {"counter", "clicks", "nexmark"}, {},
                    "what to generate"},
          KeySchema{"count", KeyType::Int, false, {}, {},
                    "records in all (absent: unbounded); nexmark: events of the full stream"},
          KeySchema{"rate", KeyType::Float, false, {}, {}, "records per second for the whole source"},
          KeySchema{"seed", KeyType::Int, false, {}, {}, "seed of the pseudo-random fields"},
          KeySchema{"start_time", KeyType::Int, false, {}, {}, "ts of record 0, epoch ms"},
          KeySchema{"interval", KeyType::Duration, false, {}, {}, "ts step between records"},
          KeySchema{"users", KeyType::Int, false, {}, {}, "clicks: distinct users"},
          KeySchema{"pages", KeyType::Int, false, {}, {}, "clicks: distinct pages"},
          KeySchema{"events", KeyType::Enum, false, {"all", "person", "auction", "bid"}, {},
                    "nexmark: the kind of events to emit, numbered as in the full stream"},
      }};
}

std::unique_ptr<Source> make_generator_source(const pipeline::PipelineSpec& spec,
                                              const pipeline::NodeSpec& node,
                                              state::FieldNames& names) {
  std::optional<NexmarkKind> only;
  if (auto events = node.config["events"].value<std::string>()) {
    if (node.config["profile"].value_or(std::string("counter")) != "nexmark")
      throw Error(ErrorKind::Usage, pipeline::position_of(spec, node, "events") + ": source '" +
                                        node.name + "': 'events' needs profile = \"nexmark\"");
    if (*events == "person") only = NexmarkKind::Person;
    if (*events == "auction") only = NexmarkKind::Auction;
    if (*events == "bid") only = NexmarkKind::Bid;
  }
  return std::make_unique<GeneratorSource>(node, names, only);
}

} // namespace streamctl::operators
