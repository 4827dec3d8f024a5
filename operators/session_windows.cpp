#include "operators/session_windows.hpp"

#include <algorithm>
#include <new>
#include <optional>
#include <memory>
#include <utility>
#include <vector>

#include "operators/bad_record.hpp"
#include "state/changed_groups.hpp"
#include "state/barrier_timers.hpp"
#include "state/frozen_key_groups.hpp"
#include "state/key_group.hpp"
#include "state/key_codec.hpp"
#include "state/keyed_map.hpp"
#include "state/owned_timers.hpp"
#include "state/state_codec.hpp"
#include "state/timer_service.hpp"

namespace streamctl::operators {

namespace {

// State: per time domain, a KeyedMap from the key's canonical bytes (hash: hash_key_bytes of
// them) to the key's sessions, ordered by start, none overlapping or touching another.
//
// Timers (key bytes, key hash, time, tag = session start) are lazy: a session that grows or
// merges keeps the timers it has, and only needs one at or before its due time, which is its
// end until it has fired (end above the watermark), then end + allowed_lateness. So a session
// extended by every record of a busy key costs no timer operation per record. A timer that
// goes off finds the session of its tag (none: it is stale), and then fires the session if
// the timer is at its end, drops it when the timer is at or past its end + allowed_lateness,
// and otherwise registers the timer the session needs now. Event-time sessions whose end was
// at or below the watermark before an advance of the watermark have fired already.
//
// (Processing time has no lateness and no "fired" state: a due session fires and goes.)

// One aggregates block on the heap.
class Block {
public:
  explicit Block(const Aggregates& aggregates)
      : aggregates_(&aggregates),
        bytes_(static_cast<std::byte*>(
            ::operator new(aggregates.state_bytes(), std::align_val_t(aggregates.block_align())))) {
    aggregates.init(bytes_);
  }
  Block(Block&& other) noexcept
      : aggregates_(other.aggregates_), bytes_(std::exchange(other.bytes_, nullptr)) {}
  Block& operator=(Block&& other) noexcept {
    if (this != &other) {
      release();
      aggregates_ = other.aggregates_;
      bytes_ = std::exchange(other.bytes_, nullptr);
    }
    return *this;
  }
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;
  ~Block() { release(); }

  std::byte* get() const { return bytes_; }
  std::size_t heap_bytes() const { return bytes_ ? aggregates_->state_bytes() : 0; }

private:
  void release() {
    if (bytes_ == nullptr) return;
    aggregates_->destroy(bytes_);
    ::operator delete(bytes_, std::align_val_t(aggregates_->block_align()));
    bytes_ = nullptr;
  }

  const Aggregates* aggregates_;
  std::byte* bytes_;
};

struct Session {
  std::int64_t start; // the first record's time
  std::int64_t end;   // the last record's time + gap
  Block block;
};

struct Sessions {
  std::vector<Session> list;

  std::size_t heap_bytes() const {
    std::size_t bytes = list.capacity() * sizeof(Session);
    for (const auto& s : list)
      bytes += s.block.heap_bytes();
    return bytes;
  }
};

class SessionWindows final : public WindowOperatorBase {
public:
  explicit SessionWindows(WindowSettings settings) : WindowOperatorBase(std::move(settings)) {}
  ~SessionWindows() override { freezer_.abandon(); } // no other thread reads a group from here on

  void open(OperatorContext& ctx) override {
    Operator::open(ctx);
    auto max_parallelism = static_cast<std::uint32_t>(ctx.pipeline->max_parallelism);
    auto range = state::key_group_range(ctx.subtask, ctx.parallelism, max_parallelism);
    event_sessions_.emplace(range, max_parallelism);
    processing_sessions_.emplace(range, max_parallelism);
    event_sessions_->set_write_check(&freezer_);
    processing_sessions_->set_write_check(&freezer_);
    timers_.emplace(range, max_parallelism);
    changed_ = state::ChangedGroups(range);
  }

  bool take_changed_key_groups(std::vector<std::uint32_t>& out) override {
    changed_.take(out);
    return true;
  }

  void process(const state::Batch& in, state::Batch& out) override {
    const std::int64_t now = ctx_.now_ms();
    begin_batch(now);
    bool retained = false;
    key_.prepare(std::span<const state::Record>(in.begin(), in.end()));
    aggregates_.prepare(std::span<const state::Record>(in.begin(), in.end()), eval_);
    for (std::size_t i = 0; i < in.size(); ++i) {
      const state::Record& record = in[i];
      const bool event = record.timestamp != state::kNoTimestamp;
      const std::int64_t t = event ? record.timestamp : now;
      if (!window_.session_in_range(t)) {
        out_of_range(record, t);
        continue;
      }
      if (!key_.encode_at(i, record, *ctx_.names, key_bytes_)) {
        report_bad_record(ctx_, record, key_.error());
        continue;
      }
      const std::uint64_t hash = state::hash_key_bytes(key_bytes_);
      const std::uint32_t group = state::key_group_of(hash, timers_->max_parallelism());
      freezer_.thaw(group); // deferred snapshots: the group as the barrier left it is serialised first
      changed_.mark(group);
      const std::int64_t end = t + window_.gap;
      SessionMap& map = event ? *event_sessions_ : *processing_sessions_;
      Sessions* sessions = map.find(key_bytes_, hash);

      // The sessions [lo, hi) that [t, end) overlaps or touches.
      std::size_t lo = 0;
      std::size_t hi = 0;
      if (sessions != nullptr) {
        const auto& list = sessions->list;
        while (lo < list.size() && list[lo].end < t)
          ++lo;
        hi = lo;
        while (hi < list.size() && list[hi].start <= end)
          ++hi;
      }

      if (lo == hi) {
        // Processing-time sessions are never late: the record's window contains its arrival.
        if (event && end + window_.allowed_lateness <= watermark_) {
          late_record(in, record, retained);
          continue;
        }
        Block block(aggregates_);
        if (!aggregates_.add_at(block.get(), i, eval_)) {
          report_bad_record(ctx_, record, eval_.error);
          continue;
        }
        if (sessions == nullptr) sessions = &map.get_or_insert(key_bytes_, hash);
        auto it = sessions->list.insert(sessions->list.begin() + static_cast<std::ptrdiff_t>(lo),
                                        Session{t, end, std::move(block)});
        schedule(event, hash, *it);
        show_if_fired(event, *it, out);
        continue;
      }

      auto& list = sessions->list;
      Session& target = list[lo];
      if (!aggregates_.add_at(target.block.get(), i, eval_)) {
        report_bad_record(ctx_, record, eval_.error);
        continue;
      }
      const std::int64_t old_start = target.start;
      const std::int64_t old_due = due(event, target);
      for (std::size_t k = lo + 1; k < hi; ++k)
        aggregates_.merge(target.block.get(), list[k].block.get());
      target.start = std::min(t, target.start);
      target.end = std::max(end, list[hi - 1].end);
      // The merged sessions' timers go stale (their tags name no session any more).
      list.erase(list.begin() + static_cast<std::ptrdiff_t>(lo + 1),
                 list.begin() + static_cast<std::ptrdiff_t>(hi));
      if (target.start != old_start || due(event, target) < old_due) schedule(event, hash, target);
      show_if_fired(event, target, out);
    }
  }

  void on_watermark(std::int64_t watermark, state::Batch& out) override {
    const std::int64_t before = watermark_;
    watermark_ = std::max(watermark_, watermark);
    timers_->advance_watermark(watermark_, [&](std::string_view key, std::uint64_t hash,
                                               std::int64_t time, std::int64_t start) {
      fire(*event_sessions_, true, before, key, hash, time, start, out);
      pass_on_if_full(out);
    });
  }

  void on_processing_time(std::int64_t now, state::Batch& out) override {
    timers_->advance_processing_time(
        now, [&](std::string_view key, std::uint64_t hash, std::int64_t time, std::int64_t start) {
          fire(*processing_sessions_, false, INT64_MIN, key, hash, time, start, out);
          pass_on_if_full(out);
        });
  }

  void finish(state::Batch& out) override {
    on_watermark(INT64_MAX, out);
    on_processing_time(INT64_MAX, out);
  }

  // Key-group segment:
  //   header    version 1, kind 'S'
  //   zigzag    gap (must match the restoring node's)
  //   twice (event time, then processing time):
  //     varint  key count
  //     per key: bytes key (canonical key bytes), varint session count, per session (by
  //              start): zigzag start, zigzag end, the aggregates block
  //   timers    (state_codec.hpp): key bytes, tag = session start; re-registered under
  //             hash_key_bytes(key), as on insert
  StateFootprint state_footprint() const override {
    StateFootprint f;
    for (const auto* map : {&event_sessions_, &processing_sessions_})
      if (*map) {
        f.entries += (*map)->size();
        f.bytes += (*map)->memory_bytes();
      }
    if (timers_) f.bytes += timers_->memory_bytes();
    return f;
  }

  void snapshot_key_group(std::uint32_t key_group, std::string& out) const override {
    if (!timers_->key_group_range().contains(key_group) || group_is_empty(key_group)) return;
    write_sessions(key_group, out);
    state::StateWriter(out).timers(*timers_, key_group);
  }

  // Deferred snapshots (Operator::freeze_key_groups). A group's sessions are in its own tables,
  // which the writer's thread may read while the task changes other groups' tables; the timers
  // of every group share one TimerService, which it may not: so the timers' bytes (the end of
  // the segment), and whether the segment is empty, are taken now, the sessions later.
  //
  // Every path that changes a group's sessions or timers, and where it thaws the group first:
  //   - a record for a key of the group (process): once its key's group is known, before any
  //     lookup of its sessions;
  //   - a timer of the group that fires (on_watermark, on_processing_time, finish: a session's
  //     row, its purge after allowed_lateness, the timer it registers next): fire();
  //   - a restore (GroupLoad::install) thaws the group it fills (none is frozen before the
  //     first snapshot, but a restore never runs after one either);
  //   - the next checkpoint: freeze_key_groups thaws the earlier freeze first; the change
  //     bookkeeping (take_changed_key_groups) does not touch the maps;
  //   - destruction: abandon, which waits for a group the writer is at.
  // No rescale keeps a session operator's worker (no take_key_group_from). The maps' write
  // check (KeyedMap::set_write_check) asserts in debug builds that no change reaches a group
  // still frozen.
  std::shared_ptr<state::FrozenKeyGroups> freeze_key_groups(const std::vector<std::uint32_t>& groups) override {
    freezer_.thaw_all(); // the earlier freeze's groups are the task's again before timers are read
    const state::KeyGroupRange range = timers_->key_group_range();
    auto timers = std::make_shared<const state::BarrierTimers>(range, groups, *timers_,
                                                               [this](std::uint32_t g) { return group_is_empty(g); });
    return freezer_.freeze(range, groups, [this, timers](std::uint32_t g, std::string& out) {
      const std::string* tail = timers->of(g);
      if (!tail) return; // empty at the barrier
      write_sessions(g, out);
      out.append(*tail);
    });
  }

  Result<void> restore_key_group(std::uint32_t key_group, std::string_view data) override {
    auto load = load_group(key_group, data);
    if (!load) return Failure{load.error()};
    return (*load)->install();
  }

  Result<std::unique_ptr<KeyGroupLoad>> load_key_group(std::uint32_t key_group,
                                                       std::string_view data) const override {
    auto load = load_group(key_group, data);
    if (!load) return Failure{load.error()};
    return std::unique_ptr<KeyGroupLoad>(std::move(*load));
  }

private:
  using SessionMap = state::KeyedMap<Sessions>;

  // One key group's sessions and timers, decoded into maps of that group alone
  // (Operator::KeyGroupLoad): built on a helper thread, handed over on the task thread.
  class GroupLoad final : public KeyGroupLoad {
  public:
    GroupLoad(SessionWindows& self, std::uint32_t group)
        : self_(self), group_(group),
          maps_{SessionMap({group, group + 1}, self.timers_->max_parallelism()),
                SessionMap({group, group + 1}, self.timers_->max_parallelism())} {}

    Result<void> install() override {
      self_.freezer_.thaw(group_);
      SessionMap* into[2] = {&*self_.event_sessions_, &*self_.processing_sessions_};
      for (SessionMap* map : into)
        if (map->group_size(group_) != 0) return self_.restore_failure(group_, "restored twice");
      for (int di = 0; di < 2; ++di)
        if (maps_[di].size() != 0) into[di]->adopt_group(group_, maps_[di]);
      timers_.register_all(*self_.timers_);
      return {};
    }

    SessionWindows& self_;
    std::uint32_t group_;
    SessionMap maps_[2]; // event time, processing time
    state::OwnedTimers timers_;
  };

  // Decodes a key-group segment. Safe on any thread while the task thread does anything but
  // snapshot or process: it reads the configuration only (Aggregates' init and deserialize
  // use no scratch) and builds maps of its own, sized once from the counts; a map finds a key
  // written twice.
  Result<std::unique_ptr<GroupLoad>> load_group(std::uint32_t key_group, std::string_view data) const {
    const auto failed = [&](const std::string& why) -> Failure {
      return restore_failure(key_group, why);
    };
    if (!timers_->key_group_range().contains(key_group))
      return failed("not a key group of this subtask");
    const std::uint32_t max_parallelism = timers_->max_parallelism();
    state::StateReader r(data);
    std::int64_t gap = 0;
    if (!r.header('S') || !r.zigzag(gap)) return failed(r.error());
    if (gap != window_.gap)
      return failed("the session gap was " + std::to_string(gap) + "ms, this node's is " +
                    std::to_string(window_.gap) + "ms");
    auto load = std::make_unique<GroupLoad>(const_cast<SessionWindows&>(*this), key_group);
    state::FieldNames names; // keys are only checked here: their names need not be the task's
    for (SessionMap& map : load->maps_) {
      std::uint64_t n;
      if (!r.count(n, 2)) return failed(r.error());
      if (n > 0) map.reserve_group(key_group, n);
      for (std::uint64_t k = 0; k < n; ++k) {
        std::string_view key;
        std::uint64_t count;
        if (!r.bytes(key) || !r.count(count, 3)) return failed(r.error());
        if (!state::valid_key_bytes(key, names)) return failed("a malformed key");
        const std::uint64_t hash = state::hash_key_bytes(key);
        if (state::key_group_of(hash, max_parallelism) != key_group)
          return failed("a key of another key group");
        if (count == 0) return failed("a key without sessions");
        auto [sessions, inserted] = map.try_emplace(key, hash);
        if (!inserted) return failed("a key twice");
        for (std::uint64_t j = 0; j < count; ++j) {
          std::int64_t start, end;
          if (!r.zigzag(start) || !r.zigzag(end)) return failed(r.error());
          if (start < min_window_time || end > max_window_time || end - start < window_.gap ||
              (!sessions->list.empty() && sessions->list.back().end >= start))
            return failed("sessions out of order or out of range");
          sessions->list.push_back(Session{start, end, Block(aggregates_)});
          std::string_view rest = r.rest();
          if (auto d = aggregates_.deserialize(sessions->list.back().block.get(), rest); !d)
            return failed("aggregates: " + d.error());
          r.skip(r.remaining() - rest.size());
        }
      }
    }
    if (auto read = load->timers_.read_group(r, key_group, max_parallelism); !read) return failed(read.error());
    if (!r.at_end()) return failed(std::to_string(r.remaining()) + " bytes after the state");
    return load;
  }


  // Whether key group `g` holds no session and no timer (it then has no segment).
  bool group_is_empty(std::uint32_t g) const {
    bool any_timer = false;
    timers_->for_each_in_group(g, [&](const state::TimerView&) { any_timer = true; });
    return !any_timer && event_sessions_->group_size(g) == 0 && processing_sessions_->group_size(g) == 0;
  }

  // The segment of key group `g` but its timers: header and sessions (see snapshot_key_group).
  // Reads the group's own tables only: safe on the writer's thread while the group is frozen.
  void write_sessions(std::uint32_t key_group, std::string& out) const {
    state::StateWriter w(out);
    w.header('S');
    w.zigzag(window_.gap);
    for (const SessionMap* map : {&*event_sessions_, &*processing_sessions_}) {
      w.varint(map->group_size(key_group));
      map->for_each_in_group(key_group, [&](std::string_view key, const Sessions& sessions) {
        w.bytes(key);
        w.varint(sessions.list.size());
        for (const Session& s : sessions.list) {
          w.zigzag(s.start);
          w.zigzag(s.end);
          aggregates_.serialize(s.block.get(), out);
        }
      });
    }
  }

  // When a session needs a timer at the latest: its end until it has fired, then the end of
  // its lateness. (An event-time session whose end is at or below the watermark has fired; it
  // is held only while allowed_lateness > 0.)
  std::int64_t due(bool event, const Session& s) const {
    return event && s.end <= watermark_ ? s.end + window_.allowed_lateness : s.end;
  }

  // Registers the timer a new or changed session of the key in key_bytes_ needs.
  void schedule(bool event, std::uint64_t hash, const Session& s) {
    if (event)
      timers_->register_event_time(key_bytes_, hash, due(true, s), s.start);
    else
      timers_->register_processing_time(key_bytes_, hash, s.end, s.start);
  }

  // A new or changed event-time session that has fired already shows at once.
  void show_if_fired(bool event, const Session& s, state::Batch& out) {
    if (event && s.end <= watermark_)
      emit_row(key_bytes_, s.start, s.end, s.block.get(), row_timestamp(s.end), out);
  }

  // A timer of the session (key, start) went off at `time`; `before` is the watermark before
  // the advance that fired it (INT64_MIN for processing time, which has no lateness).
  void fire(SessionMap& map, bool event, std::int64_t before, std::string_view key,
            std::uint64_t hash, std::int64_t time, std::int64_t start, state::Batch& out) {
    const std::uint32_t group = state::key_group_of(hash, timers_->max_parallelism());
    freezer_.thaw(group); // deferred snapshots: the group as the barrier left it is serialised first
    changed_.mark(group); // its timer went, at least
    Sessions* sessions = map.find(key, hash);
    if (sessions == nullptr) return; // stale
    auto& list = sessions->list;
    auto it =
        std::find_if(list.begin(), list.end(), [&](const Session& s) { return s.start == start; });
    if (it == list.end()) return; // stale
    const std::int64_t lateness = event ? window_.allowed_lateness : 0;
    if (event && (it->end <= before || time > it->end)) {
      // Fired already (before this advance, or by its timer at its end in this one).
      if (time < it->end + lateness) {
        timers_->register_event_time(key, hash, it->end + lateness, start);
        return;
      }
    } else if (time < it->end) {
      // Grown since this timer was set: fire at the end.
      if (event)
        timers_->register_event_time(key, hash, it->end, start);
      else
        timers_->register_processing_time(key, hash, it->end, start);
      return;
    } else {
      emit_row(key, it->start, it->end, it->block.get(),
               event ? row_timestamp(it->end) : state::kNoTimestamp, out);
      if (lateness > 0) {
        timers_->register_event_time(key, hash, it->end + lateness, start);
        return;
      }
    }
    list.erase(it);
    if (list.empty()) map.erase(key, hash);
  }

  std::optional<SessionMap> event_sessions_;
  std::optional<SessionMap> processing_sessions_;
  std::optional<state::TimerService> timers_;
  state::ChangedGroups changed_; // since the last incremental checkpoint
  // Deferred snapshots: the groups frozen at the last barrier (see freeze_key_groups). Last, so
  // that it is destroyed first (it abandons what is still frozen).
  state::KeyGroupFreezer freezer_;
};

} // namespace

std::unique_ptr<Operator> make_session_windows(WindowSettings settings) {
  return std::make_unique<SessionWindows>(std::move(settings));
}

} // namespace streamctl::operators
