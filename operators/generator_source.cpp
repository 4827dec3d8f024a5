#include "operators/generator_source.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstring>
#include <optional>

#include "operators/nexmark.hpp"
#include "operators/source_position.hpp"
#include "operators/splitmix.hpp"
#include "pipeline/spec/units.hpp"
#include "state/error.hpp"
#include "state/json_writer.hpp"

namespace streamctl::operators {

namespace {

using state::Value;

enum class Profile { Counter, Clicks, Nexmark };

// Which sequence numbers were emitted before a restore. Subtask j of p emits j, j + p, ... in
// order, so what a job emitted is a set of cursors: n was emitted when n < next[n % p]. A
// restore at another parallelism adds a layer; a layer is dropped once every number it holds
// lies below the smallest cursor of another.
struct Layer {
  std::vector<std::uint64_t> next; // by subtask; next[j] % size() == j
  bool holds(std::uint64_t n) const { return n < next[n % next.size()]; }
  std::uint64_t min() const { return *std::min_element(next.begin(), next.end()); }
  std::uint64_t max() const { return *std::max_element(next.begin(), next.end()); }
};

// Position of a generator subtask, version 1 (integers little-endian):
//
//   u8  version = 1
//   u8  kind = 'G'
//   u32 parallelism p of the subtask's node
//   u32 subtask i
//   u64 next     the next sequence number it would try (next % p == i): every number of its
//                share below it was emitted, by it or before the restore it started from
//   u32 layers   what was emitted before that restore, when the subtask has not passed it
//   per layer:   u32 q, then q x u64 next[j] (next[j] % q == j), meaning n was emitted when
//                n < next[n % q]
constexpr std::uint8_t kGeneratorPositionVersion = 1;
constexpr std::uint32_t kMaxParallelism = 1 << 16;
constexpr std::uint32_t kMaxLayers = 1024;

Result<Layer> read_layer(PositionReader& r, std::uint32_t q) {
  if (q == 0 || q > kMaxParallelism) return r.failure("bad parallelism " + std::to_string(q));
  if (r.remaining() / 8 < q) return r.failure("truncated");
  Layer layer;
  layer.next.reserve(q);
  for (std::uint32_t j = 0; j < q; ++j) {
    auto n = r.u64();
    if (!n) return Failure{n.error()};
    if (*n % q != j) return r.failure("cursor " + std::to_string(*n) + " is not of subtask " + std::to_string(j));
    layer.next.push_back(*n);
  }
  return layer;
}

class GeneratorSource final : public Source {
public:
  // `only`: for nexmark, the one kind of event to emit (absent: all), numbered as in the full
  // stream; `only_downstream`: chosen by the filters downstream, not by `events`, and then the
  // rate paces the full stream.
  // `emitted`: the fields anything downstream reads (projection.hpp); the others are not made.
  GeneratorSource(const pipeline::NodeSpec& node, state::FieldNames& names,
                  std::optional<NexmarkKind> only, bool only_downstream,
                  const pipeline::FieldSet& emitted)
      : only_(only), only_downstream_(only_downstream) {
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
    for (state::FieldId id : {seq_, ts_, user_, page_, status_, bytes_}) {
      if (id >= wanted_.size()) wanted_.resize(id + 1, 0);
      wanted_[id] = emitted.contains(std::string(names.name(id))) ? 1 : 0;
    }
    if (profile_ == Profile::Nexmark) {
      NexmarkFields fields(names);
      // Every field but some (a map's `remove` before a whole-record sink) leaves those out
      // as a set of names does: q2's URLs were made and dropped.
      if (!emitted.every_field()) {
        const std::vector<state::FieldId> ids = fields.all();
        fields.wanted.assign(*std::max_element(ids.begin(), ids.end()) + 1, 0); // non-empty
        for (state::FieldId id : ids)
          fields.wanted[id] = emitted.contains(std::string(names.name(id))) ? 1 : 0;
      }
      nexmark_.emplace(seed_, NexmarkClock{start_time_, interval_ms_}, std::move(fields));
    }
  }

  void open(OperatorContext& ctx) override {
    Source::open(ctx);
    next_ = static_cast<std::uint64_t>(ctx.subtask);
    step_ = static_cast<std::uint64_t>(ctx.parallelism);
    // The kind of event N repeats with N every 50, so this subtask's events (next_ + k * step_)
    // hold the wanted kind within any 50 in a row, or never (subtask 1 of 50 makes only
    // auctions): then it ends at once rather than scan for ever.
    never_ = only_.has_value();
    for (std::uint64_t k = 0; k < 50 && never_; ++k)
      never_ = nexmark_kind(next_ + k * step_) != *only_;
  }

  void snapshot_position(std::string& out) const override {
    PositionWriter w(out, kGeneratorPositionVersion, 'G');
    w.u32(static_cast<std::uint32_t>(step_));
    w.u32(static_cast<std::uint32_t>(ctx_.subtask));
    w.u64(next_);
    w.u32(static_cast<std::uint32_t>(before_.size()));
    for (const auto& layer : before_) {
      w.u32(static_cast<std::uint32_t>(layer.next.size()));
      for (std::uint64_t n : layer.next) w.u64(n);
    }
  }

  Result<void> restore_position(const std::vector<std::string_view>& old_subtasks) override {
    std::string what = "position of source '" + ctx_.node->name + "'";
    if (old_subtasks.empty() || old_subtasks.size() > kMaxParallelism)
      return fail(what + ": bad number of old subtasks " + std::to_string(old_subtasks.size()));
    bool all_empty = std::all_of(old_subtasks.begin(), old_subtasks.end(), [](auto p) { return p.empty(); });
    if (all_empty) return {}; // nothing was emitted
    auto q = static_cast<std::uint32_t>(old_subtasks.size());
    std::vector<Layer> layers;
    Layer newest;
    for (std::uint32_t s = 0; s < q; ++s) {
      PositionReader r(old_subtasks[s], what + " subtask " + std::to_string(s));
      if (old_subtasks[s].empty()) return r.failure("missing");
      if (auto ok = r.header(kGeneratorPositionVersion, 'G'); !ok) return ok;
      auto p = r.u32();
      if (!p) return Failure{p.error()};
      auto index = r.u32();
      if (!index) return Failure{index.error()};
      if (*p != q || *index != s)
        return r.failure("written by subtask " + std::to_string(*index) + " of " + std::to_string(*p));
      auto next = r.u64();
      if (!next) return Failure{next.error()};
      if (*next % q != s) return r.failure("cursor " + std::to_string(*next) + " is not of this subtask");
      newest.next.push_back(*next);
      auto count = r.u32();
      if (!count) return Failure{count.error()};
      if (*count > kMaxLayers) return r.failure("too many layers");
      for (std::uint32_t k = 0; k < *count; ++k) {
        auto lq = r.u32();
        if (!lq) return Failure{lq.error()};
        auto layer = read_layer(r, *lq);
        if (!layer) return Failure{layer.error()};
        if (std::none_of(layers.begin(), layers.end(), [&](const Layer& l) { return l.next == layer->next; }))
          layers.push_back(std::move(*layer));
      }
      if (auto ok = r.end(); !ok) return ok;
      if (layers.size() > kMaxLayers) return r.failure("too many layers");
    }
    layers.push_back(std::move(newest));
    // Drop each layer that another's smallest cursor covers entirely.
    for (bool dropped = true; dropped;) {
      dropped = false;
      for (std::size_t a = 0; a < layers.size() && !dropped; ++a)
        for (std::size_t b = 0; b < layers.size() && !dropped; ++b)
          if (a != b && layers[b].min() >= layers[a].max()) {
            layers.erase(layers.begin() + static_cast<std::ptrdiff_t>(a));
            dropped = true;
          }
    }
    before_ = std::move(layers);
    // Every number below the largest smallest cursor was emitted: start at this subtask's
    // first number from there, and skip what was emitted after it.
    std::uint64_t floor = 0;
    for (const auto& layer : before_) floor = std::max(floor, layer.min());
    std::uint64_t start = floor - floor % step_ + next_ % step_;
    if (start < floor) start += step_;
    next_ = std::max(next_, start);
    before_max_ = 0;
    for (const auto& layer : before_) before_max_ = std::max(before_max_, layer.max());
    skip_emitted();
    return {};
  }

  SourceStatus poll(state::Batch& out, std::size_t max_records) override {
    if (never_) return SourceStatus::End;
    std::uint64_t budget = UINT64_MAX; // of what the rate counts
    if (rate_ > 0) {
      // The rate counts from the first poll, not from open(): a slow start (many workers, a
      // restore) must not turn into a burst of the records it "owes".
      if (!rate_started_) {
        started_ = std::chrono::steady_clock::now();
        rate_started_ = true;
      }
      double per_subtask = rate_ / static_cast<double>(step_);
      double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
      auto allowed = static_cast<std::uint64_t>(elapsed * per_subtask) + 1;
      budget = allowed > paced_ ? allowed - paced_ : 0;
    }
    // The rate counts the events made; with the kind chosen by the filters downstream, every
    // event of the full stream, as those filters would see them without this source's help.
    std::size_t made = 0;
    std::uint64_t paced = 0;
    while (made < max_records && paced < budget) {
      if (bounded_ && next_ >= count_) break;
      std::uint64_t k = next_;
      next_ += step_;
      if (!before_.empty()) {
        if (emitted_before(k)) continue;
        skip_emitted();
      }
      if (only_downstream_) ++paced;
      if (only_ && nexmark_kind(k) != *only_) continue;
      make_record(k, out);
      ++made;
      if (!only_downstream_) ++paced;
    }
    paced_ += paced;
    if (made > 0) return SourceStatus::Data;
    return bounded_ && next_ >= count_ ? SourceStatus::End : SourceStatus::Idle;
  }

private:
  bool emitted_before(std::uint64_t n) const {
    return std::any_of(before_.begin(), before_.end(), [n](const Layer& l) { return l.holds(n); });
  }
  // Moves next_ past the numbers emitted before the restore; forgets them once past all.
  void skip_emitted() {
    while (!before_.empty() && next_ < before_max_ && emitted_before(next_)) next_ += step_;
    if (next_ >= before_max_) before_.clear();
  }

  void make_record(std::uint64_t n, state::Batch& out) {
    if (profile_ == Profile::Nexmark) {
      nexmark_->make(n, out);
      return;
    }
    std::int64_t ts = start_time_ + static_cast<std::int64_t>(n) * interval_ms_;
    state::InPlaceRecord record(out, 5);
    if (profile_ == Profile::Counter) {
      if (wanted_[seq_]) record.append(seq_, Value::integer(static_cast<std::int64_t>(n)));
      if (wanted_[ts_]) record.append(ts_, Value::integer(ts));
    } else {
      std::uint64_t r = splitmix64(seed_ * 0x100000001b3ULL ^ n);
      if (wanted_[ts_]) record.append(ts_, Value::integer(ts));
      if (wanted_[user_]) record.append(user_, Value::plain_string(numbered(out, "u", r % users_)));
      if (wanted_[page_])
        record.append(page_, Value::plain_string(numbered(out, "/p/", (r >> 20) % pages_)));
      std::uint64_t s = (r >> 40) % 100;
      if (wanted_[status_]) record.append(status_, Value::integer(s < 90 ? 200 : s < 97 ? 404 : 500));
      if (wanted_[bytes_])
        record.append(bytes_, Value::integer(static_cast<std::int64_t>(100 + (r >> 8) % 9900)));
    }
    record.finish();
  }

  // prefix + k in decimal, written straight into out's arena (not into a buffer and then
  // copied: a copy of a variable size is a call of memmove per record).
  static std::string_view numbered(state::Batch& out, std::string_view prefix, std::uint64_t k) {
    const std::size_t size = prefix.size() + decimal_digits(k);
    char* p = static_cast<char*>(out.arena().allocate(size, 1));
    std::memcpy(p, prefix.data(), prefix.size());
    state::write_int(static_cast<std::int64_t>(k), p + prefix.size()); // k < 2^63: a count of users or pages
    return {p, size};
  }
  static std::size_t decimal_digits(std::uint64_t k) {
    std::size_t n = 1;
    for (; k >= 10000; k /= 10000) n += 4;
    return n + (k >= 10) + (k >= 100) + (k >= 1000);
  }

  Profile profile_;
  std::optional<NexmarkKind> only_;
  bool only_downstream_ = false;
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
  std::uint64_t paced_ = 0; // what the rate counted since the first poll (see poll)
  std::vector<Layer> before_;     // emitted before the restore this subtask started from
  std::uint64_t before_max_ = 0;  // every number at or above it is not in before_
  std::chrono::steady_clock::time_point started_;
  bool rate_started_ = false;
  state::FieldId seq_, ts_, user_, page_, status_, bytes_;
  // By FieldId: whether the clicks and counter fields are made (bytes, not vector<bool>'s bits:
  // six bit extractions were a tenth of the source's instructions per record).
  std::vector<std::uint8_t> wanted_;
  std::optional<NexmarkStream> nexmark_; // for profile nexmark
};

} // namespace

namespace {

// The fields of every record of the node's profile (lint: a field read downstream that no
// record has is likely misspelt).
pipeline::FieldSet generator_fields(const pipeline::NodeSpec& node) {
  const std::string profile = node.config["profile"].value_or(std::string("counter"));
  std::vector<const char*> names;
  if (profile == "counter") names = {"seq", "ts"};
  if (profile == "clicks") names = {"ts", "user", "page", "status", "bytes"};
  if (profile == "nexmark")
    names = {"event_type", "id",          "name",        "email_address", "credit_card",
             "city",       "state",       "date_time",   "item_name",     "description",
             "initial_bid", "reserve",    "expires",     "seller",        "category",
             "auction",    "bidder",      "price",       "channel",       "url"};
  if (names.empty()) return pipeline::FieldSet::everything();
  pipeline::FieldSet out;
  for (const char* name : names) out.add(name);
  return out;
}

} // namespace

pipeline::NodeTypeSchema generator_source_schema() {
  using pipeline::KeySchema;
  using pipeline::KeyType;
  pipeline::NodeTypeSchema schema{
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
  schema.made_fields = generator_fields;
  return schema;
}

namespace {

std::optional<NexmarkKind> nexmark_kind_named(std::string_view kind) {
  if (kind == "person") return NexmarkKind::Person;
  if (kind == "auction") return NexmarkKind::Auction;
  if (kind == "bid") return NexmarkKind::Bid;
  return std::nullopt;
}

// The one kind of event that every node reading `source` keeps, when each is a filter whose
// `where` is `event_type == "KIND"` or starts with it and `&&` (Nexmark's queries select bids
// so): the others would be made only to be dropped, and an auction's words cost more than a
// bid. Their being left out changes no output, no bad record and no dead letter; positions
// number the full stream either way, so checkpoints restore across the two.
std::optional<NexmarkKind> kind_kept_downstream(const pipeline::PipelineSpec& spec,
                                                const pipeline::NodeSpec& source,
                                                state::FieldNames& names) {
  std::optional<std::string> kept;
  bool read = false;
  for (const auto& node : spec.nodes) {
    if (std::find(node.inputs.begin(), node.inputs.end(), source.name) == node.inputs.end())
      continue;
    read = true;
    auto where = node.config["where"].value<std::string>();
    if (node.type != "filter" || !where) return std::nullopt;
    std::optional<std::string> kind;
    try {
      kind = pipeline::Expression::compile(*where, names).required_string("event_type");
    } catch (const std::exception&) {
      return std::nullopt; // validation reports it
    }
    if (!kind || (kept && *kept != *kind)) return std::nullopt;
    kept = kind;
  }
  return read && kept ? nexmark_kind_named(*kept) : std::nullopt;
}

} // namespace

std::unique_ptr<Source> make_generator_source(const pipeline::PipelineSpec& spec,
                                              const pipeline::NodeSpec& node,
                                              state::FieldNames& names) {
  std::optional<NexmarkKind> only;
  bool only_downstream = false;
  if (auto events = node.config["events"].value<std::string>()) {
    if (node.config["profile"].value_or(std::string("counter")) != "nexmark")
      throw Error(ErrorKind::Usage, pipeline::position_of(spec, node, "events") + ": source '" +
                                        node.name + "': 'events' needs profile = \"nexmark\"");
    only = nexmark_kind_named(*events);
  } else if (node.config["profile"].value_or(std::string("counter")) == "nexmark") {
    only = kind_kept_downstream(spec, node, names);
    only_downstream = only.has_value();
  }
  return std::make_unique<GeneratorSource>(node, names, only, only_downstream,
                                           spec.fields_emitted(spec.index_of(node)));
}

} // namespace streamctl::operators
