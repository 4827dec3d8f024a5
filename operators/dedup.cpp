#include "operators/dedup.hpp"

#include "operators/config_problems.hpp"
#include <limits>
#include <optional>
#include <sstream>
#include <thread>
#include <memory>
#include <vector>

#include "operators/bad_record.hpp"
#include "operators/bloom_filter.hpp"
#include "operators/field_reads.hpp"
#include "operators/key_fields.hpp"
#include "pipeline/spec/pipeline_spec.hpp"
#include "pipeline/spec/snapshot_mode.hpp"
#include "state/changed_groups.hpp"
#include "state/error.hpp"
#include "state/barrier_timers.hpp"
#include "state/frozen_key_groups.hpp"
#include "state/key_codec.hpp"
#include "state/key_group.hpp"
#include "state/keyed_map.hpp"
#include "state/owned_timers.hpp"
#include "state/recycled_memory.hpp"
#include "state/state_codec.hpp"
#include "state/timer_service.hpp"

namespace streamctl::operators {

namespace {

constexpr std::int64_t kMaxTime = std::numeric_limits<std::int64_t>::max();

// a + b for b > 0, stopping at INT64_MAX (event times are untrusted input).
std::int64_t saturating_add(std::int64_t a, std::int64_t b) {
  return a > kMaxTime - b ? kMaxTime : a + b;
}

// floor(a / b) for b > 0: the generation of time a.
std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  std::int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

struct DedupConfig {
  std::int64_t within_ms = 0;
  bool bloom = false;
  double false_positive_rate = 0.01;
  std::int64_t expected_keys = 1000000;
};

class Dedup final : public Operator {
public:
  Dedup(KeyFields key, DedupConfig config) : key_(std::move(key)), config_(config) {}
  ~Dedup() override { freezer_.abandon(); } // no other thread reads a group from here on

  void open(OperatorContext& ctx) override {
    Operator::open(ctx);
    auto max_parallelism = static_cast<std::uint32_t>(ctx.pipeline->max_parallelism);
    auto range = state::key_group_range(ctx.subtask, ctx.parallelism, max_parallelism);
    if (config_.bloom) {
      bloom_.emplace(range, max_parallelism, static_cast<std::uint64_t>(config_.expected_keys),
                     config_.false_positive_rate);
    } else {
      kept_.emplace(range, max_parallelism);
      kept_->set_write_check(&freezer_);
      timers_.emplace(range, max_parallelism);
      changed_ = state::ChangedGroups(range);
    }
  }

  // Exact only: a Bloom filter's generations turn over in every group at once.
  bool take_changed_key_groups(std::vector<std::uint32_t>& out) override {
    if (!kept_) return false;
    changed_.take(out);
    return true;
  }

  void process(const state::Batch& in, state::Batch& out) override {
    if (prepare_copies_) [[unlikely]]
      prepare_copy_memory();
    // Kept records are shared with the input batch, not copied.
    out.retain_memory_of(in);
    std::optional<std::int64_t> now; // read once per batch, and only when a record needs it
    key_.prepare(std::span<const state::Record>(in.begin(), in.end()));
    for (std::size_t i = 0; i < in.size(); ++i) {
      const state::Record& record = in[i];
      std::int64_t t = record.timestamp;
      bool processing_time = t == state::kNoTimestamp;
      if (processing_time) {
        if (!now) now = ctx_.now_ms();
        t = *now;
        uses_processing_time_ = true;
      }
      if (!key_.encode_at(i, record, *ctx_.names, key_bytes_)) {
        report_bad_record(ctx_, record, key_.error());
        continue;
      }
      const std::uint64_t hash = state::hash_key_bytes(key_bytes_);
      if (kept_) {
        const std::uint32_t group = state::key_group_of(hash, kept_->max_parallelism());
        freezer_.thaw(group); // deferred snapshots: the group as the barrier left it is copied first
        changed_.mark(group);
      }
      bool keep = config_.bloom ? keep_bloom(hash, t) : keep_exact(hash, t, processing_time);
      if (keep) out.add_shared(record);
    }
    if (bloom_) bloom_->release_expired();
  }

  void on_watermark(std::int64_t watermark, state::Batch& /*out*/) override {
    if (timers_) {
      timers_->advance_watermark(watermark, [this](std::string_view key, std::uint64_t hash,
                                                   std::int64_t timestamp, std::int64_t) {
        expire(key, hash, timestamp);
      });
    } else if (bloom_ && watermark != INT64_MIN) {
      // Every later record has an event time above the watermark: its generation is at least
      // the watermark's, whose predecessor is the oldest it may need.
      bloom_->advance(floor_div(watermark, config_.within_ms));
      bloom_->release_expired();
    }
  }

  void on_processing_time(std::int64_t now_ms, state::Batch& /*out*/) override {
    if (timers_) {
      timers_->advance_processing_time(now_ms, [this](std::string_view key, std::uint64_t hash,
                                                      std::int64_t timestamp, std::int64_t) {
        expire(key, hash, timestamp);
      });
    } else if (bloom_ && uses_processing_time_) {
      // Only when records run on processing time: the clock says nothing of event time.
      bloom_->advance(floor_div(now_ms, config_.within_ms));
      bloom_->release_expired();
    }
  }

  // --- Checkpointed state ---
  //
  // Key-group segment, method = "exact":
  //   header    version 1, kind 'D'
  //   zigzag    within (must match the restoring node's)
  //   varint    key count; per key: bytes key (canonical key bytes), zigzag kept time
  //   timers    (state_codec.hpp): the expiry timers, re-registered under hash_key_bytes(key)
  // Key-group segment, method = "bloom":
  //   header    version 1, kind 'B'
  //   zigzag    within; varint filter bits; varint hash count (must match the node's sizing)
  //   varint    filter count (0 to 2); per filter: zigzag generation, bits / 8 bytes (words
  //             little-endian)
  // Subtask state: exact has none (its expiry timers are keyed; the watermark only fires
  // them). Bloom: header version 1, kind 'G', zigzag current generation (INT64_MIN before the
  // first), 1 byte "records run on processing time"; a restore takes the highest generation
  // of the old subtasks (all equal when the watermark drives them) and either flag.
  bool has_state() const override { return true; }
  StateFootprint state_footprint() const override {
    StateFootprint f;
    if (kept_) f = {kept_->size(), kept_->memory_bytes()};
    if (timers_) f.bytes += timers_->memory_bytes();
    if (bloom_) f.bytes += bloom_->memory_bytes();
    return f;
  }

  void snapshot_key_group(std::uint32_t key_group, std::string& out) const override {
    if (bloom_) {
      if (!bloom_->key_group_range().contains(key_group)) return;
      std::uint64_t n = 0;
      bloom_->for_each_in_group(key_group, [&](std::int64_t, const BloomFilter&) { ++n; });
      if (n == 0) return;
      state::StateWriter w(out);
      w.header('B');
      w.zigzag(config_.within_ms);
      w.varint(bloom_->sizing().bits);
      w.varint(bloom_->sizing().hashes);
      w.varint(n);
      bloom_->for_each_in_group(key_group, [&](std::int64_t generation, const BloomFilter& f) {
        w.zigzag(generation);
        f.append_bytes(out);
      });
      return;
    }
    if (!kept_ || !kept_->key_group_range().contains(key_group) || exact_group_is_empty(key_group)) return;
    write_kept(key_group, *kept_, out);
    state::StateWriter(out).timers(*timers_, key_group);
  }

  // Deferred snapshots (Operator::freeze_key_groups), method = "exact" (a Bloom filter's
  // generations turn over in every group at once: nothing deferred). A group's kept keys are
  // in its own table, plain bytes, which the task copies (copy-on-first-write) before it
  // changes the group, and which the writer's thread reads otherwise; the timers of every
  // group share one TimerService, so their bytes (the end of the segment) are taken now.
  //
  // Every path that changes a group's keys or timers, and where it thaws the group first:
  //   - a record for a key of the group (process): once its key's group is known;
  //   - an expiry timer of the group that fires (on_watermark, on_processing_time): expire();
  //   - a restore (GroupLoad::install) thaws the group it fills;
  //   - the next checkpoint: freeze_key_groups thaws the earlier freeze first; the change
  //     bookkeeping (take_changed_key_groups) does not touch the map;
  //   - destruction: abandon, which waits for a group the writer is at.
  // No rescale keeps a dedup worker (no take_key_group_from). The map's write check asserts in
  // debug builds that no change reaches a group still frozen.
  std::shared_ptr<state::FrozenKeyGroups> freeze_key_groups(const std::vector<std::uint32_t>& groups) override {
    if (!kept_) return nullptr;
    freezer_.thaw_all(); // the earlier freeze's groups are the task's again before timers are read
    copy_memory_->age();
    const state::KeyGroupRange range = kept_->key_group_range();
    auto timers = std::make_shared<const state::BarrierTimers>(
        range, groups, *timers_, [this](std::uint32_t g) { return exact_group_is_empty(g); });
    auto serialise = [this, timers](std::uint32_t g, std::string& out) {
      const std::string* tail = timers->of(g);
      if (!tail) return; // empty at the barrier
      write_kept(g, *kept_, out);
      out.append(*tail);
    };
    auto copy = [this, timers](std::uint32_t g) -> state::FrozenKeyGroups::GroupCopy {
      if (!timers->of(g)) return {[](std::string&) {}, 0}; // empty at the barrier
      auto copied = std::make_shared<CopiedGroup>(g, kept_->max_parallelism(), copy_memory_);
      kept_->copy_group_into(g, copied->kept);
      const std::size_t bytes = copied->kept.memory_bytes();
      return {[this, g, timers, copied](std::string& out) {
                write_kept(g, copied->kept, out);
                out.append(*timers->of(g));
              },
              bytes};
    };
    return freezer_.freeze(range, groups, std::move(serialise), std::move(copy));
  }

  // After a restore of kept keys, with deferred snapshots: the copy memory is filled ahead with
  // blocks of the restored tables' shapes, as the window does (AlignedWindows::
  // prepare_copy_memory, state/recycled_memory.hpp).
  void prepare_copy_memory() {
    prepare_copies_ = false;
    if (!kept_ || ctx_.pipeline == nullptr || !pipeline::deferred_snapshots_of(*ctx_.pipeline)) return;
    std::vector<std::size_t> sizes;
    const state::KeyGroupRange range = kept_->key_group_range();
    for (std::uint32_t g = range.first; g < range.end; ++g)
      if (std::size_t bytes = kept_->group_table_bytes(g); bytes > 0) sizes.push_back(bytes);
    if (!sizes.empty()) copy_preparer_ = state::prepare_in_background(copy_memory_, std::move(sizes), Kept::table_align());
  }

  Result<void> restore_key_group(std::uint32_t key_group, std::string_view data) override {
    if (!bloom_) {
      auto load = load_exact_group(key_group, data);
      if (!load) return Failure{load.error()};
      return (*load)->install();
    }
    const auto failed = [&](const std::string& why) -> Result<void> {
      return fail("operator '" + (ctx_.node ? ctx_.node->name : std::string("?")) +
                  "' (dedup): cannot restore key group " + std::to_string(key_group) + ": " + why);
    };
    state::StateReader r(data);
    std::int64_t within = 0;
    if (!r.header('B') || !r.zigzag(within)) return failed(r.error());
    if (within != config_.within_ms)
      return failed("'within' was " + std::to_string(within) + "ms, this node's is " +
                    std::to_string(config_.within_ms) + "ms");
    if (!bloom_->key_group_range().contains(key_group))
      return failed("not a key group of this subtask");
    std::uint64_t bits, hashes, n;
    if (!r.varint(bits) || !r.varint(hashes) || !r.varint(n)) return failed(r.error());
    if (bits != bloom_->sizing().bits || hashes != bloom_->sizing().hashes)
      return failed("the Bloom filters were sized otherwise (expected_keys, "
                    "false_positive_rate or max_parallelism changed)");
    if (n > 2) return failed("more than two filters");
    std::vector<std::pair<std::int64_t, std::string_view>> filters;
    for (std::uint64_t k = 0; k < n; ++k) {
      std::int64_t generation;
      if (!r.zigzag(generation)) return failed(r.error());
      if (r.remaining() < bits / 8) return failed("truncated");
      filters.emplace_back(generation, r.rest().substr(0, bits / 8));
      r.skip(bits / 8);
    }
    if (n == 2 && (filters[0].first & 1) == (filters[1].first & 1))
      return failed("two filters for one slot");
    if (!r.at_end()) return failed(std::to_string(r.remaining()) + " bytes after the state");
    for (const auto& [generation, bytes] : filters)
      if (!bloom_->restore_filter(key_group, generation, bytes))
        return failed("a filter that does not fit (restored twice?)");
    return {};
  }

  // Exact dedup's groups load on helper threads; Bloom filters (restore_filter) on the task's.
  Result<std::unique_ptr<KeyGroupLoad>> load_key_group(std::uint32_t key_group,
                                                       std::string_view data) const override {
    if (bloom_) return std::unique_ptr<KeyGroupLoad>{};
    auto load = load_exact_group(key_group, data);
    if (!load) return Failure{load.error()};
    return std::unique_ptr<KeyGroupLoad>(std::move(*load));
  }

  void snapshot_subtask_state(std::string& out) const override {
    if (!bloom_) return;
    state::StateWriter w(out);
    w.header('G');
    w.zigzag(bloom_->current());
    w.u8(uses_processing_time_ ? 1 : 0);
  }

  Result<void> restore_subtask_state(const std::vector<std::string_view>& old_subtasks) override {
    if (!bloom_) return {};
    for (std::size_t k = 0; k < old_subtasks.size(); ++k) {
      if (old_subtasks[k].empty()) continue;
      state::StateReader r(old_subtasks[k]);
      std::int64_t current;
      std::uint8_t processing = 0;
      if (!r.header('G') || !r.zigzag(current) || !r.u8(processing) || processing > 1 ||
          !r.at_end())
        return fail("operator '" + (ctx_.node ? ctx_.node->name : std::string("?")) +
                    "' (dedup): cannot restore the state of old subtask " + std::to_string(k) +
                    ": " + (r.error().empty() ? std::string("corrupt") : r.error()));
      bloom_->advance(current);
      uses_processing_time_ = uses_processing_time_ || processing == 1;
    }
    return {};
  }

private:
  using Kept = state::KeyedMap<std::int64_t>;

  // One key group's kept keys and expiry timers, decoded apart from the operator
  // (Operator::KeyGroupLoad): built on a helper thread, handed over on the task thread. The
  // timers' keys are copied, since the segment they were read from goes before install().
  class GroupLoad final : public KeyGroupLoad {
  public:
    GroupLoad(Dedup& self, std::uint32_t group)
        : self_(self), group_(group), kept_({group, group + 1}, self.kept_->max_parallelism()) {}

    Result<void> install() override {
      self_.freezer_.thaw(group_);
      self_.prepare_copies_ = true;
      if (self_.kept_->group_size(group_) != 0) return self_.restore_failure(group_, "restored twice");
      if (kept_.size() != 0) self_.kept_->adopt_group(group_, kept_);
      timers_.register_all(*self_.timers_);
      return {};
    }

    Dedup& self_;
    std::uint32_t group_;
    Kept kept_;
    state::OwnedTimers timers_;
  };

  Failure restore_failure(std::uint32_t key_group, const std::string& why) const {
    return Failure{"operator '" + (ctx_.node ? ctx_.node->name : std::string("?")) +
                   "' (dedup): cannot restore key group " + std::to_string(key_group) + ": " + why};
  }

  // Decodes an exact dedup's key-group segment. Safe on any thread while the task thread does
  // anything but snapshot or process: it reads the configuration only and builds its own map,
  // sized once from the count; the map finds a key written twice.
  Result<std::unique_ptr<GroupLoad>> load_exact_group(std::uint32_t key_group, std::string_view data) const {
    const auto failed = [&](const std::string& why) -> Failure { return restore_failure(key_group, why); };
    state::StateReader r(data);
    std::int64_t within = 0;
    if (!r.header('D') || !r.zigzag(within)) return failed(r.error());
    if (within != config_.within_ms)
      return failed("'within' was " + std::to_string(within) + "ms, this node's is " +
                    std::to_string(config_.within_ms) + "ms");
    if (!kept_ || !kept_->key_group_range().contains(key_group))
      return failed("not a key group of this subtask");
    const std::uint32_t max_parallelism = kept_->max_parallelism();
    std::uint64_t n;
    if (!r.count(n, 2)) return failed(r.error());
    auto load = std::make_unique<GroupLoad>(const_cast<Dedup&>(*this), key_group);
    if (n > 0) load->kept_.reserve_group(key_group, n);
    state::FieldNames names; // keys are only checked here: their names need not be the task's
    for (std::uint64_t k = 0; k < n; ++k) {
      std::string_view key;
      std::int64_t kept;
      if (!r.bytes(key) || !r.zigzag(kept)) return failed(r.error());
      if (!state::valid_key_bytes(key, names)) return failed("a malformed key");
      const std::uint64_t hash = state::hash_key_bytes(key);
      if (state::key_group_of(hash, max_parallelism) != key_group)
        return failed("a key of another key group");
      if (!load->kept_.try_emplace(key, hash, kept).second) return failed("a key twice");
    }
    if (auto read = load->timers_.read_group(r, key_group, max_parallelism); !read) return failed(read.error());
    if (!r.at_end()) return failed(std::to_string(r.remaining()) + " bytes after the state");
    return load;
  }

  // |t - kept| < within, without overflow for any two times.
  bool is_duplicate(std::int64_t t, std::int64_t kept) const {
    std::uint64_t distance = t >= kept ? static_cast<std::uint64_t>(t) - static_cast<std::uint64_t>(kept)
                                       : static_cast<std::uint64_t>(kept) - static_cast<std::uint64_t>(t);
    return distance < static_cast<std::uint64_t>(config_.within_ms);
  }

  bool keep_exact(std::uint64_t hash, std::int64_t t, bool processing_time) {
    auto [kept, inserted] = kept_->try_emplace(key_bytes_, hash, t);
    if (!inserted) {
      if (is_duplicate(t, *kept)) return false;
      if (t < *kept) return true; // far behind the reference: kept, the reference stays
      // A newer reference: its expiry replaces the old one (in whichever domain that was).
      const std::int64_t old_expiry = saturating_add(*kept, config_.within_ms);
      timers_->delete_event_time(key_bytes_, hash, old_expiry);
      timers_->delete_processing_time(key_bytes_, hash, old_expiry);
      *kept = t;
    }
    const std::int64_t expiry = saturating_add(t, config_.within_ms);
    if (processing_time)
      timers_->register_processing_time(key_bytes_, hash, expiry);
    else
      timers_->register_event_time(key_bytes_, hash, expiry);
    return true;
  }

  // Whether key group `g` holds no kept key and no timer (exact; it then has no segment).
  bool exact_group_is_empty(std::uint32_t g) const {
    bool any_timer = false;
    timers_->for_each_in_group(g, [&](const state::TimerView&) { any_timer = true; });
    return !any_timer && kept_->group_size(g) == 0;
  }

  // The exact segment of key group `g` but its timers, from `map` (the operator's, or a
  // deferred snapshot's copy of the group).
  void write_kept(std::uint32_t key_group, const Kept& map, std::string& out) const {
    state::StateWriter w(out);
    w.header('D');
    w.zigzag(config_.within_ms);
    w.varint(map.group_size(key_group));
    map.for_each_in_group(key_group, [&](std::string_view key, std::int64_t kept) {
      w.bytes(key);
      w.zigzag(kept);
    });
  }

  // One group's kept keys, copied for a deferred snapshot, in memory the next copies reuse.
  struct CopiedGroup {
    CopiedGroup(std::uint32_t g, std::uint32_t max_parallelism, std::shared_ptr<state::RecycledMemory> m)
        : memory(std::move(m)), kept({g, g + 1}, max_parallelism, memory.get()) {}
    std::shared_ptr<state::RecycledMemory> memory; // first: outlives the table
    Kept kept;
  };

  // A timer at kept + within fired: forget the key unless its reference has moved on since.
  void expire(std::string_view key, std::uint64_t hash, std::int64_t timestamp) {
    const std::uint32_t group = state::key_group_of(hash, kept_->max_parallelism());
    freezer_.thaw(group); // deferred snapshots: the group as the barrier left it is copied first
    changed_.mark(group); // its timer went, at least
    const std::int64_t* kept = kept_->find(key, hash);
    if (kept != nullptr && saturating_add(*kept, config_.within_ms) <= timestamp) kept_->erase(key, hash);
  }

  bool keep_bloom(std::uint64_t hash, std::int64_t t) {
    const auto hashes = BloomFilter::hashes_of(key_bytes_, hash);
    return !bloom_->test_and_add(hashes, floor_div(t, config_.within_ms));
  }

  KeyFields key_;
  DedupConfig config_;
  bool uses_processing_time_ = false;
  // exact: the time of each key's reference record, and its expiry timer.
  std::optional<state::KeyedMap<std::int64_t>> kept_;
  std::optional<state::TimerService> timers_;
  state::ChangedGroups changed_; // exact: since the last incremental checkpoint
  // bloom: the filters of each key group.
  std::optional<KeyedBloomGenerations> bloom_;
  std::string key_bytes_; // scratch
  // exact, deferred snapshots: where copies of groups are made (shared with copies in flight).
  std::shared_ptr<state::RecycledMemory> copy_memory_ =
      std::make_shared<state::RecycledMemory>(state::FrozenKeyGroups::default_copy_budget);
  bool prepare_copies_ = false; // groups were restored since (prepare_copy_memory)
  std::jthread copy_preparer_;  // prepare_copy_memory's, joined when it goes
  // Deferred snapshots: the groups frozen at the last barrier (see freeze_key_groups). Last, so
  // that it is destroyed first (it abandons what is still frozen).
  state::KeyGroupFreezer freezer_;
};

std::string number_text(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

} // namespace

namespace {

// Projection: the key, and what is read after it (records pass whole).
std::vector<pipeline::FieldSet> dedup_reads(const pipeline::PipelineSpec&, const pipeline::NodeSpec& node,
                                            const pipeline::FieldSet& main, const pipeline::FieldSet&) {
  pipeline::FieldSet reads = main;
  add_key_fields(reads, node);
  return {reads};
}

} // namespace

pipeline::NodeTypeSchema dedup_schema() {
  using pipeline::KeySchema;
  using pipeline::KeyType;
  pipeline::NodeTypeSchema schema{
      "dedup",
      {
          KeySchema{"key", KeyType::StringArray, true, {}, {}, "fields that identify a duplicate"},
          KeySchema{"within", KeyType::Duration, true, {}, {}, "drop repeats of a key kept less than this before"},
          KeySchema{"method", KeyType::Enum, false, {"exact", "bloom"}, {}, "exact keyed state or Bloom filters"},
          KeySchema{"false_positive_rate", KeyType::Float, false, {}, {},
                    "bloom: share of non-duplicates dropped by mistake, in (0, 0.5]"},
          KeySchema{"expected_keys", KeyType::Int, false, {}, {},
                    "bloom: distinct keys per `within` for the whole node"},
      }};
  schema.read_fields = dedup_reads;
  return schema;
}

std::unique_ptr<Operator> make_dedup(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node,
                                     state::FieldNames& names) {
  ConfigProblems problems(spec, node);
  std::optional<KeyFields> key;
  try {
    key.emplace(KeyFields::from_node(spec, node, names));
  } catch (const Error& e) {
    problems.add_line(e.what());
  }
  DedupConfig config;

  config.within_ms = pipeline::duration_ms_or(node.config.get("within"), 0);
  if (config.within_ms <= 0) problems.add("within", "'within' must be more than 0");

  std::string method = node.config["method"].value_or(std::string("exact"));
  if (method != "exact" && method != "bloom")
    problems.add("method", "'method' must be \"exact\" or \"bloom\", got \"" + method + "\"");
  config.bloom = method == "bloom";

  bool sizes_valid = true;
  if (const toml::node* fp = node.config.get("false_positive_rate")) {
    std::optional<double> v = fp->value<double>();
    if (!config.bloom) {
      problems.add("false_positive_rate", "'false_positive_rate' applies only with method = \"bloom\"");
    } else if (!v || !(*v > 0.0 && *v <= 0.5)) {
      problems.add("false_positive_rate",
                   "'false_positive_rate' must be in (0, 0.5], got " + (v ? number_text(*v) : std::string("?")));
      sizes_valid = false;
    } else {
      config.false_positive_rate = *v;
    }
  }

  if (const toml::node* n = node.config.get("expected_keys")) {
    std::optional<std::int64_t> v = n->value<std::int64_t>();
    if (!config.bloom) {
      problems.add("expected_keys", "'expected_keys' applies only with method = \"bloom\"");
    } else if (!v || *v < 1) {
      problems.add("expected_keys",
                   "'expected_keys' must be at least 1, got " + (v ? std::to_string(*v) : std::string("?")));
      sizes_valid = false;
    } else {
      config.expected_keys = *v;
    }
  }

  if (config.bloom && sizes_valid) {
    // Two generations of filters for every key group: refuse what no machine could hold
    // rather than fail on an allocation mid-run.
    const auto max_parallelism = static_cast<std::uint64_t>(spec.max_parallelism);
    const auto expected = static_cast<std::uint64_t>(config.expected_keys);
    const auto sizing = BloomFilter::Sizing::for_keys((expected + max_parallelism - 1) / max_parallelism,
                                                      config.false_positive_rate);
    const double total_bytes = 2.0 * static_cast<double>(max_parallelism) * static_cast<double>(sizing.bits / 8);
    constexpr double limit = 64.0 * 1024 * 1024 * 1024;
    if (total_bytes > limit)
      problems.add(node.config.contains("expected_keys") ? "expected_keys" : "false_positive_rate",
                   "Bloom filters for " + std::to_string(expected) + " keys at a false positive rate of " +
                       number_text(config.false_positive_rate) + " would take " +
                       number_text(total_bytes / (1024.0 * 1024 * 1024)) + " GiB (at most 64 GiB)");
  }

  problems.throw_if_any();
  return std::make_unique<Dedup>(std::move(*key), config);
}

} // namespace streamctl::operators
