#include "operators/join.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "operators/bad_record.hpp"
#include "operators/join_buffer.hpp"
#include "operators/join_output.hpp"
#include "operators/partition_key.hpp"
#include "pipeline/spec/projection.hpp"
#include "pipeline/spec/units.hpp"
#include "state/changed_groups.hpp"
#include "state/error.hpp"
#include "state/key_codec.hpp"
#include "state/key_group.hpp"
#include "state/keyed_map.hpp"
#include "state/state_codec.hpp"
#include "state/timer_service.hpp"

namespace streamctl::operators {

namespace {

constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kNoTimer = kMin;

std::int64_t saturating_add(std::int64_t a, std::int64_t b) {
  std::int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return b > 0 ? kMax : kMin;
  return r;
}

std::int64_t saturating_sub(std::int64_t a, std::int64_t b) {
  std::int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) return b > 0 ? kMin : kMax;
  return r;
}

// One entry of the join's state: the records of both sides for one key (interval join) or one
// key and window (window join). An interval join keeps one cleanup timer per side registered,
// at the expiry of that side's earliest record; `timer` remembers it so that an earlier record
// can move it.
struct JoinEntry {
  RecordBuffer sides[2];
  std::int64_t timer[2] = {kNoTimer, kNoTimer};
  state::TimeDomain timer_domain[2] = {state::TimeDomain::EventTime, state::TimeDomain::EventTime};

  std::size_t heap_bytes() const { return sides[0].heap_bytes() + sides[1].heap_bytes(); }
};

struct WindowSpec {
  std::int64_t size = 0;
  std::int64_t slide = 0; // == size for tumbling windows
};

struct IntervalSpec {
  std::int64_t lower = 0;
  std::int64_t upper = 0;
};

struct JoinConfig {
  std::optional<WindowSpec> window; // exactly one of window and interval
  std::optional<IntervalSpec> interval;
  bool broadcast = false;
};

class Join final : public Operator {
public:
  Join(JoinConfig config, PartitionKey left_key, PartitionKey right_key,
       pipeline::Expression left_on, pipeline::Expression right_on, JoinOutput output)
      : config_(config), keys_{std::move(left_key), std::move(right_key)}, on_{std::move(left_on),
                                                                               std::move(right_on)},
        output_(std::move(output)) {}

  void open(OperatorContext& ctx) override {
    Operator::open(ctx);
    auto max_parallelism = static_cast<std::uint32_t>(ctx.pipeline->max_parallelism);
    // With broadcast, the left records of a subtask carry any key (their edge is not keyed):
    // the subtask's state spans every key group.
    state::KeyGroupRange range =
        config_.broadcast ? state::KeyGroupRange{0, max_parallelism}
                          : state::key_group_range(ctx.subtask, ctx.parallelism, max_parallelism);
    entries_.emplace(range, max_parallelism);
    timers_.emplace(range, max_parallelism);
    if (!config_.broadcast) changed_ = state::ChangedGroups(range); // broadcast: subtask state only
    state::Value null = state::Value::null();
    state::encode_key(std::span<const state::Value>(&null, 1), *ctx.names, null_key_);
  }

  bool take_changed_key_groups(std::vector<std::uint32_t>& out) override {
    changed_.take(out);
    return true;
  }

  // A batch that does not say its input counts as the left side's.
  void process(const state::Batch& in, state::Batch& out) override { process_input(0, in, out); }

  void process_input(int input, const state::Batch& in, state::Batch& out) override {
    const int side = input == 0 ? 0 : 1;
    out.retain_memory_of(in); // output rows share the values of the records that arrive
    const std::int64_t now = ctx_.now_ms();
    eval_.arena = &out.arena();
    eval_.now_ms = now;
    for (const auto& record : in) {
      const bool event_time = record.timestamp != state::kNoTimestamp;
      const std::int64_t time = event_time ? record.timestamp : now;
      if (config_.window)
        add_to_windows(side, record, time, event_time);
      else
        add_to_interval(side, record, time, event_time, out);
    }
  }

  void on_watermark(std::int64_t watermark, state::Batch& out) override {
    advance(state::TimeDomain::EventTime, watermark, out);
  }

  void on_processing_time(std::int64_t now_ms, state::Batch& out) override {
    advance(state::TimeDomain::ProcessingTime, now_ms, out);
  }

  // The end of input: every window fires, every record expires (the runtime has advanced the
  // watermark to +infinity already; processing-time state goes here).
  void finish(state::Batch& out) override {
    advance(state::TimeDomain::EventTime, kMax, out);
    advance(state::TimeDomain::ProcessingTime, kMax, out);
  }

  JoinStateSize state_size() const {
    JoinStateSize size;
    if (!entries_) return size;
    size.entries = entries_->size();
    entries_->for_each([&](std::string_view, const JoinEntry& entry) {
      size.records += entry.sides[0].size() + entry.sides[1].size();
    });
    size.timers = timers_->size();
    size.memory_bytes = entries_->memory_bytes() + timers_->memory_bytes();
    return size;
  }

  // --- Checkpointed state ---
  //
  // A group body (what one key group holds):
  //   varint    entry count
  //   per entry:
  //     bytes   the join key (canonical key bytes)
  //     zigzag  window start (window join only)
  //     twice (left, then right): records (state_codec.hpp: a batch with field names, each
  //             record stamped with its time)
  //     interval join only, twice: zigzag the side's cleanup timer (INT64_MIN: none), 1 byte
  //             its domain
  //   timers    (state_codec.hpp): key bytes, tag = window start (window join) or side
  //             (interval join); re-registered under hash_key_bytes(key), as on insert
  //
  // strategy = "hash": a key-group segment is header (version 1, kind 'J'), 1 byte form (0
  // window join, 1 interval join), a group body. The subtask state is header (version 1, kind
  // 'M') and zigzag the watermark (the lateness of a record depends on it and the runtime does
  // not replay it; a restore takes the lowest of the old subtasks', all equal under aligned
  // barriers).
  //
  // strategy = "broadcast": the state is not partitioned by key group (a subtask's left
  // records carry any key, and every subtask holds all right records), so it is all subtask
  // state: header (version 1, kind 'X'), 1 byte form, zigzag the watermark, varint group
  // count, per group: varint key group, a group body. A restore at a new parallelism p gives
  // new subtask s the right records of old subtask 0 (the same in every old subtask) and the
  // left records of every old subtask j with j % p == s, with the timers that go with them.
  bool has_state() const override { return true; }
  StateFootprint state_footprint() const override {
    JoinStateSize size = state_size();
    return {size.entries, size.memory_bytes};
  }

  void snapshot_key_group(std::uint32_t key_group, std::string& out) const override {
    if (config_.broadcast || !entries_ || !entries_->key_group_range().contains(key_group)) return;
    if (!group_has_state(key_group)) return;
    state::StateWriter w(out);
    w.header('J');
    w.u8(config_.window ? 0 : 1);
    write_group(key_group, w);
  }

  void snapshot_subtask_state(std::string& out) const override {
    if (!timers_) return;
    state::StateWriter w(out);
    if (!config_.broadcast) {
      w.header('M');
      w.zigzag(timers_->current_watermark());
      return;
    }
    w.header('X');
    w.u8(config_.window ? 0 : 1);
    w.zigzag(timers_->current_watermark());
    const state::KeyGroupRange range = entries_->key_group_range();
    std::uint64_t groups = 0;
    for (std::uint32_t kg = range.first; kg < range.end; ++kg)
      groups += group_has_state(kg) ? 1 : 0;
    w.varint(groups);
    for (std::uint32_t kg = range.first; kg < range.end; ++kg) {
      if (!group_has_state(kg)) continue;
      w.varint(kg);
      write_group(kg, w);
    }
  }

  Result<void> restore_key_group(std::uint32_t key_group, std::string_view data) override {
    const auto failed = [&](const std::string& why) -> Result<void> {
      return restore_failure("key group " + std::to_string(key_group), why);
    };
    if (config_.broadcast)
      return failed("a broadcast join keeps no state by key group (it is subtask state)");
    if (!entries_->key_group_range().contains(key_group))
      return failed("not a key group of this subtask");
    if (group_has_state(key_group)) return failed("restored twice");
    state::StateReader r(data);
    std::uint8_t form;
    if (!r.header('J') || !r.u8(form)) return failed(r.error());
    if (form != (config_.window ? 0 : 1))
      return failed(form == 0 ? "the state of a window join, this is an interval join"
                              : "the state of an interval join, this is a window join");
    ParsedGroup group;
    if (!parse_group(r, key_group, group)) return failed(r.error());
    if (!r.at_end()) return failed(std::to_string(r.remaining()) + " bytes after the state");
    apply(group, true, true);
    return {};
  }

  Result<void> restore_subtask_state(const std::vector<std::string_view>& old_subtasks) override {
    std::optional<std::int64_t> watermark;
    std::vector<ParsedGroup> groups;
    for (std::size_t j = 0; j < old_subtasks.size(); ++j) {
      if (old_subtasks[j].empty()) continue;
      const auto failed = [&](const std::string& why) -> Result<void> {
        return restore_failure("the state of old subtask " + std::to_string(j), why);
      };
      state::StateReader r(old_subtasks[j]);
      std::int64_t w = kMin;
      if (!config_.broadcast) {
        if (!r.header('M') || !r.zigzag(w)) return failed(r.error());
      } else {
        std::uint8_t form;
        if (!r.header('X') || !r.u8(form) || !r.zigzag(w)) return failed(r.error());
        if (form != (config_.window ? 0 : 1))
          return failed(form == 0 ? "the state of a window join, this is an interval join"
                                  : "the state of an interval join, this is a window join");
        const bool take_right = j == 0;
        const bool take_left = static_cast<int>(j % static_cast<std::size_t>(ctx_.parallelism)) ==
                               ctx_.subtask;
        std::uint64_t n;
        if (!r.count(n, 2)) return failed(r.error());
        std::unordered_set<std::uint64_t> seen;
        for (std::uint64_t k = 0; k < n; ++k) {
          std::uint64_t kg;
          if (!r.varint(kg)) return failed(r.error());
          if (!entries_->key_group_range().contains(static_cast<std::uint32_t>(kg)) ||
              kg > UINT32_MAX || !seen.insert(kg).second)
            return failed("a bad key group number " + std::to_string(kg));
          ParsedGroup g;
          if (!parse_group(r, static_cast<std::uint32_t>(kg), g)) return failed(r.error());
          g.take[0] = take_left;
          g.take[1] = take_right;
          if (take_left || take_right) groups.push_back(std::move(g));
        }
      }
      if (!r.at_end()) return failed(std::to_string(r.remaining()) + " bytes after the state");
      watermark = watermark ? std::min(*watermark, w) : w;
    }
    if (watermark) timers_->restore_current_time(state::TimeDomain::EventTime, *watermark);
    for (auto& g : groups)
      apply(g, g.take[0], g.take[1]);
    return {};
  }

private:
  struct ParsedEntry {
    std::string_view key;
    std::uint64_t hash = 0;
    std::int64_t start = 0;
    state::Batch sides[2];
    std::int64_t timer[2] = {kNoTimer, kNoTimer};
    state::TimeDomain timer_domain[2] = {state::TimeDomain::EventTime,
                                         state::TimeDomain::EventTime};
  };
  struct ParsedGroup {
    std::vector<ParsedEntry> entries;
    std::vector<state::StoredTimer> timers;
    bool take[2] = {true, true};
  };

  Failure restore_failure(const std::string& what, const std::string& why) const {
    return fail("operator '" + (ctx_.node ? ctx_.node->name : std::string("?")) +
                "' (join): cannot restore " + what + ": " + why);
  }

  bool group_has_state(std::uint32_t key_group) const {
    if (entries_->group_size(key_group) != 0) return true;
    bool any = false;
    timers_->for_each_in_group(key_group, [&](const state::TimerView&) { any = true; });
    return any;
  }

  void write_group(std::uint32_t key_group, state::StateWriter& w) const {
    w.varint(entries_->group_size(key_group));
    entries_->for_each_in_group(key_group, [&](std::string_view map_key, const JoinEntry& entry) {
      std::string_view key = map_key;
      if (config_.window) {
        std::int64_t start;
        std::memcpy(&start, map_key.data() + map_key.size() - 8, 8);
        key = map_key.substr(0, map_key.size() - 8);
        w.bytes(key);
        w.zigzag(start);
      } else {
        w.bytes(key);
      }
      for (int side = 0; side < 2; ++side) {
        state::Batch batch;
        entry.sides[side].for_each([&](std::int64_t time, std::string_view body) {
          batch.add_shared(decode_stored_record(body, time, batch.arena()));
        });
        w.records(batch, *ctx_.names);
      }
      if (!config_.window)
        for (int side = 0; side < 2; ++side) {
          w.zigzag(entry.timer[side]);
          w.u8(static_cast<std::uint8_t>(entry.timer_domain[side]));
        }
    });
    w.timers(*timers_, key_group);
  }

  // Reads and checks a group body of `key_group`; r.error() says why when false.
  bool parse_group(state::StateReader& r, std::uint32_t key_group, ParsedGroup& g) {
    const std::uint32_t max_parallelism = entries_->max_parallelism();
    std::uint64_t n;
    if (!r.count(n, 3)) return false;
    g.entries.clear();
    g.entries.reserve(n);
    std::unordered_set<std::string> seen;
    for (std::uint64_t k = 0; k < n; ++k) {
      ParsedEntry& e = g.entries.emplace_back();
      if (!r.bytes(e.key)) return false;
      if (config_.window && !r.zigzag(e.start)) return false;
      if (!state::valid_key_bytes(e.key, *ctx_.names) || e.key == null_key_)
        return r.fail("a malformed join key");
      e.hash = state::hash_key_bytes(e.key);
      if (state::key_group_of(e.hash, max_parallelism) != key_group)
        return r.fail("a key of another key group");
      if (config_.window && floor_mod(e.start, config_.window->slide) != 0)
        return r.fail("a window start that is not aligned");
      std::string map_key(e.key);
      if (config_.window) window_key(e.key, e.start, map_key);
      if (!seen.insert(map_key).second) return r.fail("an entry twice");
      for (int side = 0; side < 2; ++side) {
        if (!r.records(*ctx_.names, e.sides[side])) return false;
        for (const auto& record : e.sides[side])
          if (record.timestamp == state::kNoTimestamp) return r.fail("a record without its time");
      }
      if (!config_.window)
        for (int side = 0; side < 2; ++side) {
          std::uint8_t domain;
          if (!r.zigzag(e.timer[side]) || !r.u8(domain)) return false;
          if (domain > 1) return r.fail("a bad timer domain");
          e.timer_domain[side] = static_cast<state::TimeDomain>(domain);
        }
    }
    if (!r.timers(g.timers)) return false;
    for (const auto& t : g.timers) {
      if (state::key_group_of(state::hash_key_bytes(t.key), max_parallelism) != key_group)
        return r.fail("a timer of another key group");
      if (!config_.window && t.tag != 0 && t.tag != 1) return r.fail("a timer of no side");
    }
    return true;
  }

  // Adds the parsed state of a group: the records of the sides taken, and the timers that go
  // with them (re-registered under hash_key_bytes of their key, as on insert).
  void apply(ParsedGroup& g, bool take_left, bool take_right) {
    const bool take[2] = {take_left, take_right};
    std::string map_key;
    for (ParsedEntry& e : g.entries) {
      const bool both = take_left && take_right;
      const bool any = (take_left && !e.sides[0].empty()) || (take_right && !e.sides[1].empty());
      if (!both && !any) continue;
      map_key.assign(e.key);
      if (config_.window) window_key(e.key, e.start, map_key);
      JoinEntry& entry = entries_->get_or_insert(map_key, e.hash);
      for (int side = 0; side < 2; ++side) {
        if (!take[side]) continue;
        for (const auto& record : e.sides[side])
          entry.sides[side].add(record.timestamp, record);
        if (!config_.window && e.timer[side] != kNoTimer &&
            (entry.timer[side] == kNoTimer ||
             (entry.timer_domain[side] == e.timer_domain[side] && e.timer[side] < entry.timer[side]))) {
          entry.timer[side] = e.timer[side];
          entry.timer_domain[side] = e.timer_domain[side];
        }
      }
    }
    for (const auto& t : g.timers) {
      if (!config_.window && !take[t.tag]) continue;
      const std::uint64_t hash = state::hash_key_bytes(t.key);
      if (config_.window) {
        window_key(t.key, t.tag, map_key);
        if (!entries_->contains(map_key, hash)) continue;
      } else if (!entries_->contains(t.key, hash)) {
        continue;
      }
      if (t.domain == state::TimeDomain::EventTime)
        timers_->register_event_time(t.key, hash, t.timestamp, t.tag);
      else
        timers_->register_processing_time(t.key, hash, t.timestamp, t.tag);
    }
  }

  static std::int64_t floor_mod(std::int64_t t, std::int64_t d) {
    std::int64_t m = t % d;
    return m < 0 ? m + d : m;
  }

  // Sets key_ and hash_ to the join key of `record`; false when the record joins nothing: a
  // null key (silently) or a key expression that fails (reported).
  bool key_of(int side, const state::Record& record) {
    keys_[side].encode(record, *ctx_.names, key_);
    if (key_ == null_key_) {
      // PartitionKey gives a failing expression the null key too: tell the two apart.
      on_scratch_.reset();
      on_eval_.arena = &on_scratch_;
      on_eval_.now_ms = eval_.now_ms;
      state::Value value;
      if (!on_[side].eval(record, on_eval_, value))
        report_bad_record(ctx_, record,
                          std::string(side == 0 ? "on.left: " : "on.right: ") + on_eval_.error);
      return false;
    }
    hash_ = state::hash_key_bytes(key_);
    // Every record with a key goes into the key's state (or is counted late against it).
    changed_.mark(state::key_group_of(hash_, timers_->max_parallelism()));
    return true;
  }

  // ---- window join ----

  // Map key of a (key, window): the key bytes, then the window start (8 bytes, host order;
  // memory only). The hash stays that of the key bytes, so all windows of a key share its key
  // group.
  void window_key(std::string_view key, std::int64_t start, std::string& out) {
    out.assign(key);
    char bytes[8];
    std::memcpy(bytes, &start, 8);
    out.append(bytes, 8);
  }

  void add_to_windows(int side, const state::Record& record, std::int64_t time, bool event_time) {
    const WindowSpec& w = *config_.window;
    // The windows containing `time` start at the multiples of the slide in (time - size, time].
    std::int64_t offset = time % w.slide;
    if (offset < 0) offset += w.slide;
    std::int64_t start;
    if (__builtin_sub_overflow(time, offset, &start)) {
      report_bad_record(ctx_, record, "event time " + std::to_string(time) + " is out of range");
      return;
    }
    const std::int64_t lowest = saturating_sub(time, w.size);
    const std::int64_t watermark = timers_->current_watermark();
    bool keyed = false;
    bool any_open = false;
    for (; start > lowest; start -= w.slide) {
      const std::int64_t end = saturating_add(start, w.size);
      if (!(event_time && end <= watermark)) {
        if (!keyed) {
          if (!key_of(side, record)) return;
          keyed = true;
        }
        any_open = true;
        window_key(key_, start, window_key_);
        bool inserted = false;
        JoinEntry& entry = entries_->get_or_insert(window_key_, hash_, &inserted);
        entry.sides[side].add(time, record);
        if (inserted) {
          if (event_time)
            timers_->register_event_time(key_, hash_, end, start);
          else
            timers_->register_processing_time(key_, hash_, end, start);
        }
      }
      if (start < kMin + w.slide) break; // the next start would not be representable
    }
    if (!any_open)
      report_bad_record(ctx_, record,
                        "late record: every window of event time " + std::to_string(time) +
                            " ends at or below the watermark " + std::to_string(watermark));
  }

  void fire_window(state::TimeDomain domain, std::string_view key, std::uint64_t hash,
                   std::int64_t end, std::int64_t start, state::Batch& out) {
    window_key(key, start, window_key_);
    JoinEntry* entry = entries_->find(window_key_, hash);
    if (entry == nullptr) return;
    decoded_[0].clear();
    decoded_[1].clear();
    for (int side = 0; side < 2; ++side)
      entry->sides[side].for_each([&](std::int64_t time, std::string_view body) {
        decoded_[side].push_back(decode_stored_record(body, time, out.arena()));
      });
    entries_->erase(window_key_, hash);
    const std::int64_t timestamp =
        domain == state::TimeDomain::EventTime ? end - 1 : state::kNoTimestamp;
    for (const auto& left : decoded_[0])
      for (const auto& right : decoded_[1])
        emit_pair(left, right, timestamp, out);
  }

  // ---- interval join ----

  // When a record of `side` at `time` can match nothing more: in event time once the watermark
  // reaches it; in processing time once the clock passes it (a record arriving at exactly
  // that time still matches).
  std::int64_t expiry(int side, std::int64_t time, state::TimeDomain domain) const {
    const IntervalSpec& b = *config_.interval;
    std::int64_t last_match =
        side == 0 ? saturating_add(time, b.upper) : saturating_sub(time, b.lower);
    return domain == state::TimeDomain::EventTime ? last_match : saturating_add(last_match, 1);
  }

  void add_to_interval(int side, const state::Record& record, std::int64_t time, bool event_time,
                       state::Batch& out) {
    if (event_time && time <= timers_->current_watermark()) {
      report_bad_record(ctx_, record,
                        "late record: event time " + std::to_string(time) +
                            " is at or below the watermark " +
                            std::to_string(timers_->current_watermark()));
      return;
    }
    if (!key_of(side, record)) return;
    const IntervalSpec& b = *config_.interval;
    JoinEntry& entry = entries_->get_or_insert(key_, hash_);

    // The times of the other side that match: tr in [tl + lower, tl + upper] for a left record,
    // tl in [tr - upper, tr - lower] for a right one.
    std::int64_t from, to;
    if (side == 0) {
      from = saturating_add(time, b.lower);
      to = saturating_add(time, b.upper);
    } else {
      from = saturating_sub(time, b.upper);
      to = saturating_sub(time, b.lower);
    }
    entry.sides[1 - side].for_each_in(
        from, to, [&](std::int64_t other_time, std::string_view body) {
          state::Record other = decode_stored_record(body, other_time, out.arena());
          const std::int64_t timestamp =
              event_time ? std::max(time, other_time) : state::kNoTimestamp;
          if (side == 0)
            emit_pair(record, other, timestamp, out);
          else
            emit_pair(other, record, timestamp, out);
        });

    entry.sides[side].add(time, record);
    const auto domain =
        event_time ? state::TimeDomain::EventTime : state::TimeDomain::ProcessingTime;
    const std::int64_t expires = expiry(side, time, domain);
    if (entry.timer[side] == kNoTimer) {
      register_timer(domain, expires, side);
      entry.timer[side] = expires;
      entry.timer_domain[side] = domain;
    } else if (entry.timer_domain[side] == domain && expires < entry.timer[side]) {
      // An out-of-order record is now the earliest: move the side's timer to it.
      if (domain == state::TimeDomain::EventTime)
        timers_->delete_event_time(key_, hash_, entry.timer[side], side);
      else
        timers_->delete_processing_time(key_, hash_, entry.timer[side], side);
      register_timer(domain, expires, side);
      entry.timer[side] = expires;
    }
    // A record of the other domain (a pipeline mixing event and processing time) waits for the
    // side's timer, or for the end of input.
  }

  void register_timer(state::TimeDomain domain, std::int64_t at, int side) {
    if (domain == state::TimeDomain::EventTime)
      timers_->register_event_time(key_, hash_, at, side);
    else
      timers_->register_processing_time(key_, hash_, at, side);
  }

  // A side's cleanup timer: drop what has expired, keep a timer for what remains.
  void expire(state::TimeDomain domain, std::string_view key, std::uint64_t hash, int side) {
    JoinEntry* entry = entries_->find(key, hash);
    if (entry == nullptr) return;
    const std::int64_t clock = domain == state::TimeDomain::EventTime
                                   ? timers_->current_watermark()
                                   : timers_->current_processing_time();
    RecordBuffer& buffer = entry->sides[side];
    entry->timer[side] = kNoTimer;
    while (!buffer.empty() && expiry(side, buffer.front_time(), domain) <= clock)
      buffer.drop_through(buffer.front_time());
    if (!buffer.empty()) {
      const std::int64_t next = expiry(side, buffer.front_time(), domain);
      if (domain == state::TimeDomain::EventTime)
        timers_->register_event_time(key, hash, next, side);
      else
        timers_->register_processing_time(key, hash, next, side);
      entry->timer[side] = next;
      entry->timer_domain[side] = domain;
    }
    if (entry->sides[0].empty() && entry->sides[1].empty()) {
      // Delete the other side's timer if it is of the other domain (mixed pipelines only).
      const int other = 1 - side;
      if (entry->timer[other] != kNoTimer) {
        if (entry->timer_domain[other] == state::TimeDomain::EventTime)
          timers_->delete_event_time(key, hash, entry->timer[other], other);
        else
          timers_->delete_processing_time(key, hash, entry->timer[other], other);
      }
      entries_->erase(key, hash);
    }
  }

  // ---- both ----

  void advance(state::TimeDomain domain, std::int64_t time, state::Batch& out) {
    eval_.arena = &out.arena();
    eval_.now_ms = ctx_.now_ms();
    auto fire = [&](std::string_view key, std::uint64_t hash, std::int64_t at, std::int64_t tag) {
      changed_.mark(state::key_group_of(hash, timers_->max_parallelism())); // its timer went, at least
      if (config_.window)
        fire_window(domain, key, hash, at, tag, out);
      else
        expire(domain, key, hash, static_cast<int>(tag));
    };
    if (domain == state::TimeDomain::EventTime)
      timers_->advance_watermark(time, fire);
    else
      timers_->advance_processing_time(time, fire);
  }

  void emit_pair(const state::Record& left, const state::Record& right, std::int64_t timestamp,
                 state::Batch& out) {
    if (!output_.emit(left, right, timestamp, out, eval_))
      report_bad_record(ctx_, output_.pair(), eval_.error);
  }

  JoinConfig config_;
  PartitionKey keys_[2];
  pipeline::Expression on_[2];
  JoinOutput output_;
  std::optional<state::KeyedMap<JoinEntry>> entries_;
  std::optional<state::TimerService> timers_;
  state::ChangedGroups changed_; // since the last incremental checkpoint

  // Scratch, per subtask.
  std::string null_key_;   // the encoding of the null key
  std::string key_;        // the join key of the record at hand
  std::uint64_t hash_ = 0; // its hash_key_bytes
  std::string window_key_;
  std::vector<state::Record> decoded_[2]; // a firing window's records, in the output arena
  pipeline::EvalContext eval_;
  state::Arena on_scratch_{256};
  pipeline::EvalContext on_eval_;
};

// ---- configuration ----

std::string position_in(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node,
                        std::string_view table, std::string_view key) {
  if (const toml::node* value = node.config[table][key].node()) {
    const auto& begin = value->source().begin;
    if (begin.line > 0)
      return spec.file.string() + ":" + std::to_string(begin.line) + ":" +
             std::to_string(begin.column);
  }
  return pipeline::position_of(spec, node, table);
}

class Problems {
public:
  explicit Problems(const pipeline::NodeSpec& node) : node_(node) {}
  void add(const std::string& where, const std::string& message) {
    text_ += text_.empty() ? "" : "\n";
    text_ += where + ": join '" + node_.name + "': " + message;
  }
  void add_raw(const std::string& message) {
    text_ += text_.empty() ? "" : "\n";
    text_ += message;
  }
  void throw_if_any() const {
    if (!text_.empty()) throw Error(ErrorKind::Usage, text_);
  }

private:
  const pipeline::NodeSpec& node_;
  std::string text_;
};

std::optional<WindowSpec> read_window(const pipeline::PipelineSpec& spec,
                                      const pipeline::NodeSpec& node, Problems& problems) {
  const toml::table* table = node.config["window"].as_table();
  if (table == nullptr) return std::nullopt;
  WindowSpec w;
  const std::string kind = (*table)["kind"].value_or(std::string("tumbling"));
  w.size = pipeline::duration_ms_or(table->get("size"), 0);
  if (w.size <= 0)
    problems.add(position_in(spec, node, "window", "size"), "'window.size' must be positive");
  if (kind == "sliding") {
    if (!table->contains("slide")) {
      problems.add(pipeline::position_of(spec, node, "window"),
                   "a sliding window needs 'window.slide'");
      return std::nullopt;
    }
    w.slide = pipeline::duration_ms_or(table->get("slide"), 0);
    if (w.slide <= 0)
      problems.add(position_in(spec, node, "window", "slide"), "'window.slide' must be positive");
    else if (w.size > 0 && w.slide > w.size)
      problems.add(position_in(spec, node, "window", "slide"),
                   "'window.slide' must not be larger than 'window.size'");
  } else {
    if (table->contains("slide"))
      problems.add(position_in(spec, node, "window", "slide"),
                   "'window.slide' is only for sliding windows");
    w.slide = w.size;
  }
  if (w.size <= 0 || w.slide <= 0) return std::nullopt;
  return w;
}

std::optional<IntervalSpec> read_interval(const pipeline::PipelineSpec& spec,
                                          const pipeline::NodeSpec& node, Problems& problems) {
  const toml::table* table = node.config["interval"].as_table();
  if (table == nullptr) return std::nullopt;
  std::optional<std::int64_t> bounds[2];
  const char* names[2] = {"lower", "upper"};
  for (int k = 0; k < 2; ++k) {
    const std::string text = (*table)[names[k]].value_or(std::string());
    bounds[k] = pipeline::parse_signed_duration_ms(text);
    if (!bounds[k])
      problems.add(position_in(spec, node, "interval", names[k]),
                   "bad duration '" + text + "' in 'interval." + names[k] +
                       "': " + pipeline::duration_help + ", with an optional '-'");
  }
  if (!bounds[0] || !bounds[1]) return std::nullopt;
  if (*bounds[0] > *bounds[1]) {
    problems.add(position_in(spec, node, "interval", "lower"),
                 "'interval.lower' must not be greater than 'interval.upper'");
    return std::nullopt;
  }
  return IntervalSpec{*bounds[0], *bounds[1]};
}

} // namespace

namespace {

// Projection: each side reads its `on` key, and what the output needs of it. With `select`,
// the members of `left` / `right` that the select expressions read (every expression, used
// downstream or not, so that one that fails still fails); without, the output is the left's
// fields then the right's that the left lacks, so both sides read what consumers read.
std::vector<pipeline::FieldSet> join_reads(const pipeline::PipelineSpec&,
                                           const pipeline::NodeSpec& node,
                                           const pipeline::FieldSet& main,
                                           const pipeline::FieldSet&) {
  std::vector<pipeline::FieldSet> reads(2);
  const toml::table* select = node.config["select"].as_table();
  for (int side = 0; side < 2; ++side) {
    reads[side].add(pipeline::fields_of_expression(join_on_text(node, side)));
    if (select == nullptr) {
      reads[side].add(main);
      continue;
    }
    state::FieldNames scratch;
    for (const auto& [name, value] : *select) {
      const auto* text = value.as_string();
      std::optional<std::vector<std::string>> members;
      if (text != nullptr) try {
          members = pipeline::Expression::compile(text->get(), scratch)
                        .fields_within(side == 0 ? "left" : "right");
        } catch (const pipeline::ExpressionError&) {
        }
      if (!members) {
        reads[side].add(pipeline::FieldSet::everything());
        break;
      }
      for (const auto& member : *members) reads[side].add(member);
    }
  }
  return reads;
}

} // namespace

pipeline::NodeTypeSchema join_schema() {
  using pipeline::KeySchema;
  using pipeline::KeyType;
  pipeline::NodeTypeSchema schema{
      "join",
      {
          KeySchema{
              "on",
              KeyType::Table,
              true,
              {},
              {
                  KeySchema{"left", KeyType::Expression, true, {}, {}, "key of the left input"},
                  KeySchema{"right", KeyType::Expression, true, {}, {}, "key of the right input"},
              },
              "the join keys: { left = \"expr\", right = \"expr\" }"},
          KeySchema{
              "window",
              KeyType::Table,
              false,
              {},
              {
                  KeySchema{
                      "kind", KeyType::Enum, true, {"tumbling", "sliding"}, {}, "window kind"},
                  KeySchema{"size", KeyType::Duration, true, {}, {}, "window length"},
                  KeySchema{"slide", KeyType::Duration, false, {}, {}, "sliding windows: step"},
              },
              "a window join: { kind, size, slide }"},
          KeySchema{"interval",
                    KeyType::Table,
                    false,
                    {},
                    {
                        // Signed durations ("-5s"): parsed by the factory, not as Duration.
                        KeySchema{"lower",
                                  KeyType::String,
                                  true,
                                  {},
                                  {},
                                  "earliest right time, relative to the left"},
                        KeySchema{"upper",
                                  KeyType::String,
                                  true,
                                  {},
                                  {},
                                  "latest right time, relative to the left"},
                    },
                    "an interval join: { lower = \"-5s\", upper = \"5s\" }"},
          KeySchema{
              "strategy", KeyType::Enum, false, {"hash", "broadcast"}, {}, "how the inputs meet"},
          KeySchema{
              "select", KeyType::ExpressionMap, false, {}, {}, "output fields: name = \"left.f\""},
      }};
  schema.read_fields = join_reads;
  return schema;
}

std::unique_ptr<Operator> make_join(const pipeline::PipelineSpec& spec,
                                    const pipeline::NodeSpec& node, state::FieldNames& names) {
  Problems problems(node);
  if (node.inputs.size() != 2)
    problems.add(pipeline::position_of(spec, node, "inputs"),
                 "needs exactly two inputs (the left, then the right); got " +
                     std::to_string(node.inputs.size()));
  JoinConfig config;
  const bool has_window = node.config.contains("window");
  const bool has_interval = node.config.contains("interval");
  if (has_window && has_interval)
    problems.add(
        pipeline::position_of(spec, node, "interval"),
        "takes either 'window' (a window join) or 'interval' (an interval join), not both");
  else if (!has_window && !has_interval)
    problems.add(pipeline::position_of(spec, node, "type"),
                 "needs 'window' (a window join) or 'interval' (an interval join)");
  config.window = read_window(spec, node, problems);
  config.interval = read_interval(spec, node, problems);
  config.broadcast = node.config["strategy"].value_or(std::string("hash")) == "broadcast";

  std::optional<PartitionKey> keys[2];
  std::optional<pipeline::Expression> on[2];
  for (int side = 0; side < 2; ++side) {
    try {
      keys[side] = PartitionKey::for_input(spec, node, side, names);
      on[side] = pipeline::Expression::compile(join_on_text(node, side), names);
    } catch (const Error& e) {
      problems.add_raw(e.what());
    } catch (const pipeline::ExpressionError&) {
      // for_input has reported the same text already
    }
  }
  std::optional<JoinOutput> output;
  try {
    output = JoinOutput::from_node(spec, node, names);
  } catch (const Error& e) {
    problems.add_raw(e.what());
  }
  problems.throw_if_any();
  return std::make_unique<Join>(config, std::move(*keys[0]), std::move(*keys[1]), std::move(*on[0]),
                                std::move(*on[1]), std::move(*output));
}

std::optional<JoinStateSize> join_state_size(const Operator& op) {
  if (const auto* join = dynamic_cast<const Join*>(&op)) return join->state_size();
  return std::nullopt;
}

} // namespace streamctl::operators
