#include "operators/reduce.hpp"

#include <chrono>
#include <memory>
#include <new>
#include <optional>

#include "operators/aggregates.hpp"
#include "operators/bad_record.hpp"
#include "operators/field_reads.hpp"
#include "operators/key_fields.hpp"
#include "operators/keyed_delta_load.hpp"
#include "operators/toml_order.hpp"
#include "pipeline/spec/pipeline_spec.hpp"
#include "state/key_codec.hpp"
#include "state/changed_entries.hpp"
#include "state/changed_groups.hpp"
#include "state/delta_captures.hpp"
#include "state/frozen_key_groups.hpp"
#include "state/key_group.hpp"
#include "state/keyed_map.hpp"
#include "state/pending_take.hpp"
#include "state/state_codec.hpp"

namespace streamctl::operators {

namespace {

// One key's aggregates: a block laid out by Aggregates, and when the key was last seen.
class Row {
public:
  Row() = default;
  Row(Row&& other) noexcept : aggregates_(other.aggregates_), block_(other.block_), last_seen_(other.last_seen_) {
    other.block_ = nullptr;
  }
  Row& operator=(Row&& other) noexcept {
    if (this != &other) {
      release();
      aggregates_ = other.aggregates_;
      block_ = other.block_;
      last_seen_ = other.last_seen_;
      other.block_ = nullptr;
    }
    return *this;
  }
  ~Row() { release(); }

  void create(const Aggregates& aggregates) {
    aggregates_ = &aggregates;
    block_ = static_cast<std::byte*>(
        ::operator new(aggregates.state_bytes(), std::align_val_t(aggregates.block_align())));
    aggregates.init(block_);
  }
  std::byte* block() const { return block_; }
  std::int64_t last_seen() const { return last_seen_; }
  void touch(std::int64_t now) { last_seen_ = now; }
  std::size_t heap_bytes() const { return aggregates_ ? aggregates_->state_bytes() : 0; }
  // The block moves to an operator of the same configuration (Operator::take_key_group_from),
  // whose Aggregates lays it out alike and destroys it from now on.
  void rebind(const Aggregates& aggregates) {
    if (aggregates_ != nullptr) aggregates_ = &aggregates;
  }

private:
  void release() {
    if (block_ == nullptr) return;
    aggregates_->destroy(block_);
    ::operator delete(block_, std::align_val_t(aggregates_->block_align()));
    block_ = nullptr;
  }

  const Aggregates* aggregates_ = nullptr;
  std::byte* block_ = nullptr;
  std::int64_t last_seen_ = 0;
};

class Reduce final : public Operator {
public:
  Reduce(KeyFields key, Aggregates aggregates, std::int64_t ttl_ms)
      : key_(std::move(key)), aggregates_(std::move(aggregates)), ttl_ms_(ttl_ms) {}
  ~Reduce() override { freezer_.abandon(); } // no other thread reads a group from here on

  void open(OperatorContext& ctx) override {
    Operator::open(ctx);
    auto max_parallelism = static_cast<std::uint32_t>(ctx.pipeline->max_parallelism);
    rows_.emplace(state::key_group_range(ctx.subtask, ctx.parallelism, max_parallelism), max_parallelism);
    rows_->set_write_check(&freezer_);
    changed_ = state::ChangedGroups(rows_->key_group_range());
    entries_ = state::ChangedEntries(rows_->key_group_range());
    captures_ = state::DeltaCaptures<RowCapture>(rows_->key_group_range());
  }

  bool take_changed_key_groups(std::vector<std::uint32_t>& out) override {
    changed_.take(out);
    return true;
  }

  void process(const state::Batch& in, state::Batch& out) override {
    out.retain_memory_of(in);
    eval_.arena = &out.arena();
    std::int64_t now = ctx_.now_ms(); // the wall clock, but for tests that set it
    eval_.now_ms = now;
    if (ttl_ms_ > 0 && now - last_sweep_ >= ttl_ms_ / 2 + 1) expire(now);
    key_.prepare(std::span<const state::Record>(in.begin(), in.end()));
    aggregates_.prepare(std::span<const state::Record>(in.begin(), in.end()), eval_);
    for (std::size_t i = 0; i < in.size(); ++i) {
      const state::Record& record = in[i];
      if (!key_.encode_at(i, record, *ctx_.names, key_bytes_)) {
        report_bad_record(ctx_, record, key_.error());
        continue;
      }
      std::uint64_t hash = state::hash_key_bytes(key_bytes_);
      const std::uint32_t group = state::key_group_of(hash, rows_->max_parallelism());
      freezer_.thaw(group); // deferred snapshots: the group as the barrier left it is serialised first
      changed_.mark(group);
      bool inserted = false;
      Row* found;
      if (entries_.recording(group)) {
        bool newly_marked = false;
        std::tie(found, inserted) = rows_->try_emplace_marked(key_bytes_, hash, newly_marked);
        if (newly_marked) entries_.record(group, key_bytes_, hash, rows_->group_size(group));
      } else {
        std::tie(found, inserted) = rows_->try_emplace(key_bytes_, hash);
      }
      Row& row = *found;
      if (inserted) row.create(aggregates_);
      if (!aggregates_.add_at(row.block(), i, eval_)) {
        report_bad_record(ctx_, record, eval_.error);
        if (inserted) rows_->erase(key_bytes_, hash);
        continue;
      }
      row.touch(now);
      builder_.reset();
      key_.append_fields(builder_, out);
      aggregates_.emit(row.block(), builder_, out);
      builder_.set_timestamp(record.timestamp);
      builder_.finish(out);
    }
  }

  // --- Checkpointed state ---
  //
  // Key-group segment (state/state_codec.hpp for the primitives):
  //   header    version 1, kind 'R'
  //   1 byte    1 when each row carries its last_seen time (the node has a ttl), else 0
  //   varint    row count
  //   per row:  bytes key (canonical key bytes), [zigzag last_seen ms], the aggregates block
  //             (Aggregates::serialize)
  // No timers (the ttl sweeps by processing time) and no subtask state.
  bool has_state() const override { return true; }
  StateFootprint state_footprint() const override {
    if (!rows_) return {};
    return {rows_->size(), rows_->memory_bytes()};
  }

  void snapshot_key_group(std::uint32_t key_group, std::string& out) const override {
    if (!rows_ || !rows_->key_group_range().contains(key_group) || rows_->group_size(key_group) == 0)
      return;
    state::StateWriter w(out);
    w.header('R');
    w.u8(ttl_ms_ > 0 ? 1 : 0);
    w.varint(rows_->group_size(key_group));
    rows_->for_each_in_group(key_group, [&](std::string_view key, const Row& row) { write_row(key, row, out); });
  }

  // Key-group delta segment (keyed_delta, state/snapshot_format.hpp): the rows of the group
  // that changed since an earlier snapshot of it, against the group as that left it:
  //   header    version 1, kind 'r'
  //   1 byte    1 when each row carries its last_seen time, else 0 (as the keyed segment)
  //   varint    U = rows written; per row as in the keyed segment: the row now, inserted or
  //             replacing
  //   varint    E = rows erased (expired by the ttl); per row: bytes key (one absent already
  //             is no error: a row made and expired between two snapshots)
  // A changed row is tracked (state/changed_entries.hpp) under its key bytes and key hash; its
  // mark is in rows_.
  // Deferred snapshots (Operator::freeze_key_groups): a group's rows are in its own table, and
  // a reduce has no timers, so the writer's thread serialises a group as snapshot_key_group
  // does. Every path that changes a group's rows, and where it thaws the group first:
  //   - a record for a key of the group (process): where its group is resolved;
  //   - the ttl sweep (expire), group by group before it erases any row of it;
  //   - the next checkpoint's change bookkeeping (take_changed_entries unmarks rows):
  //     thaw_all; its snapshot only reads, and freeze_key_groups thaws the earlier freeze;
  //   - a rescale that keeps this worker: take_key_group_from thaws the donor's group;
  //   - a restore (GroupLoad::install) thaws the group it fills;
  //   - destruction: abandon, which waits for a group the writer is at.
  // The map's write check (KeyedMap::set_write_check) asserts in debug builds that no change
  // reaches a group still frozen.
  std::shared_ptr<state::FrozenKeyGroups> freeze_key_groups(const std::vector<std::uint32_t>& groups) override {
    if (!rows_) return nullptr;
    auto serialise = [this](std::uint32_t g, std::string& out) { snapshot_key_group(g, out); };
    // Beside the deltas this barrier froze (freeze_pending_take), which stay frozen.
    if (std::exchange(frozen_deltas_now_, false))
      return freezer_.freeze_also(rows_->key_group_range(), groups, std::move(serialise));
    return freezer_.freeze(rows_->key_group_range(), groups, std::move(serialise));
  }

  // The unmark's probe of a changed row also serialises it, as the delta writes it, so that a
  // delta of this take's keys alone is assembled later by the snapshot writer from those bytes
  // (defer_key_group_deltas) rather than found again at the barrier. Deferred snapshots
  // (`deferred`) leave the keys unresolved at the barrier instead (state/pending_take.hpp): the
  // writer's thread, or the task before it changes a group, finds and serialises the rows.
  bool take_changed_entries(std::vector<state::GroupEntries>& out, bool deferred) override {
    freezer_.thaw_all(); // unmarking writes the groups' slots
    captures_.drop();
    frozen_deltas_now_ = false;
    state::settle(pending_take_,
                  [this](std::uint32_t g, const PendingTake::Epochs& e) { abandon_pending(g, e); });
    if (deferred) {
      take_pending(out);
      return true;
    }
    const std::size_t first = out.size();
    entries_.take(
        out,
        [&](std::string_view key, std::uint64_t hash) -> std::optional<bool> {
          bool was_marked = false;
          const Row* row = rows_->unmark_find(key, hash, was_marked);
          if (row == nullptr) return std::nullopt;
          if (was_marked) {
            RowCapture& c = captures_.of(rows_->key_group_of(hash));
            write_row(key, *row, c.written);
            ++c.rows;
          }
          return was_marked;
        },
        [&](std::uint32_t group) { rows_->unmark_group(group); },
        [&](std::string_view, std::uint64_t hash) { rows_->prefetch(hash); });
    // A take gives a group's keys present and marked first, in the order serialised, then
    // those erased (ChangedEntries::take).
    for (std::size_t i = first; i < out.size(); ++i) {
      RowCapture& c = captures_.of(out[i].key_group);
      state::StateWriter w(c.erased);
      for (std::size_t k = c.rows; k < out[i].keys.size(); ++k) w.bytes(out[i].keys[k]);
      c.erased_rows = out[i].keys.size() - c.rows;
    }
    captures_.mark_fresh();
    return true;
  }

  std::shared_ptr<state::FrozenKeyGroups> defer_key_group_deltas(const state::DeltaKeys& deltas) override {
    if (!rows_) return nullptr;
    if (pending_take_ && !pending_take_->frozen()) return freeze_pending_take(deltas);
    return captures_.defer(
        deltas, freezer_,
        [this](std::uint32_t group, std::size_t changed) {
          return state::ChangedEntries::delta_pays(changed, rows_->group_size(group));
        },
        [with_ttl = ttl_ms_ > 0](std::uint32_t, RowCapture&& c) { return copy_of(std::move(c), with_ttl); });
  }

  bool snapshot_key_group_delta(std::uint32_t key_group, const std::vector<std::string>& keys,
                                std::string& out) const override {
    if (!rows_ || !rows_->key_group_range().contains(key_group)) return false;
    // Much of the group changed (the keys of several takes): written whole, which is cheaper
    // to write than a delta of as many rows (state/changed_entries.hpp).
    if (!state::ChangedEntries::delta_pays(keys.size(), rows_->group_size(key_group))) return false;
    std::vector<std::pair<std::string_view, const Row*>> written;
    std::vector<std::string_view> erased;
    // Hashed first, so that the finds' cache misses overlap (KeyedMap::find_each).
    std::vector<std::pair<std::string_view, std::uint64_t>> probes;
    probes.reserve(keys.size());
    for (const std::string& key : keys) probes.emplace_back(key, state::hash_key_bytes(key));
    rows_->find_each(probes, [&](std::size_t i, const Row* row) {
      if (row) written.emplace_back(probes[i].first, row);
      else erased.push_back(probes[i].first);
    });
    state::StateWriter w(out);
    write_delta_header(w, ttl_ms_ > 0);
    w.varint(written.size());
    for (const auto& [key, row] : written) write_row(key, *row, out);
    w.varint(erased.size());
    for (std::string_view key : erased) w.bytes(key);
    return true;
  }

  Result<std::unique_ptr<KeyGroupLoad>> load_key_group_with_deltas(
      std::uint32_t key_group, std::string_view data,
      const std::vector<std::string_view>& deltas) const override {
    if (!rows_ || !rows_->key_group_range().contains(key_group))
      return restore_failure(key_group, "not a key group of this subtask");
    return KeyedDeltaLoad::load(*this, key_group, data, deltas);
  }

  // The donor's table of the group moves as it is (KeyedMap::adopt_group); each row then points
  // at this operator's Aggregates, which outlives it (the donor's does not).
  std::unique_ptr<KeyGroupLoad> take_key_group_from(Operator& donor_op, std::uint32_t key_group) const override {
    auto* donor = dynamic_cast<Reduce*>(&donor_op);
    if (donor == nullptr || !donor->rows_ || !rows_ || !donor->rows_->key_group_range().contains(key_group) ||
        !rows_->key_group_range().contains(key_group) ||
        donor->rows_->max_parallelism() != rows_->max_parallelism() ||
        donor->aggregates_.state_bytes() != aggregates_.state_bytes() || donor->ttl_ms_ != ttl_ms_)
      return nullptr;
    donor->freezer_.thaw(key_group); // its table moves out
    // Stamps the donor's deferred take left pending leave with the table, stale.
    state::give_up_group(donor->pending_take_, key_group,
                         [donor](std::uint32_t g, const PendingTake::Epochs& e) { donor->abandon_pending(g, e); });
    auto load = std::make_unique<GroupLoad>(const_cast<Reduce&>(*this), key_group);
    if (donor->rows_->group_size(key_group) != 0) {
      load->rows_.adopt_group(key_group, *donor->rows_);
      load->rows_.unmark_group(key_group); // as a restored entry: unmarked
      load->rows_.for_each([&](std::string_view, Row& row) { row.rebind(aggregates_); });
    }
    return load;
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
  friend KeyedDeltaLoad; // load_key_group_with_deltas (ordinary lookup: not a new class here)
  using Rows = state::KeyedMap<Row>;

  // One key group's rows, decoded into a map of that group alone (Operator::KeyGroupLoad):
  // built on a helper thread, adopted by the operator's map on the task thread.
  class GroupLoad final : public KeyGroupLoad {
  public:
    GroupLoad(Reduce& self, std::uint32_t group)
        : self_(self), group_(group), rows_({group, group + 1}, self.rows_->max_parallelism()) {}

    Result<void> install() override {
      self_.freezer_.thaw(group_);
      if (self_.rows_->group_size(group_) != 0) return self_.restore_failure(group_, "restored twice");
      if (rows_.size() != 0) self_.rows_->adopt_group(group_, rows_);
      return {};
    }

    Reduce& self_;
    std::uint32_t group_;
    Rows rows_;
  };

  Failure restore_failure(std::uint32_t key_group, const std::string& why) const {
    return Failure{"operator '" + (ctx_.node ? ctx_.node->name : std::string("?")) +
                   "' (reduce): cannot restore key group " + std::to_string(key_group) + ": " + why};
  }

  // Decodes a key-group segment. Safe on any thread while the task thread does anything but
  // snapshot or process: it reads the operator's configuration only (Aggregates' init and
  // deserialize use no scratch) and builds a map of its own, sized once from the count; the
  // map finds a key written twice.
  Result<std::unique_ptr<GroupLoad>> load_group(std::uint32_t key_group, std::string_view data) const {
    const auto failed = [&](const std::string& why) -> Failure { return restore_failure(key_group, why); };
    if (!rows_ || !rows_->key_group_range().contains(key_group))
      return failed("not a key group of this subtask");
    state::StateReader r(data);
    std::uint8_t has_last_seen = 0;
    std::uint64_t n = 0;
    if (!r.header('R') || !r.u8(has_last_seen) || !r.count(n, 2)) return failed(r.error());
    if (has_last_seen > 1) return failed("bad flags byte");
    auto load = std::make_unique<GroupLoad>(const_cast<Reduce&>(*this), key_group);
    if (n > 0) load->rows_.reserve_group(key_group, n);
    state::FieldNames names; // keys are only checked here: their names need not be the task's
    const std::int64_t now = ctx_.now_ms();
    for (std::uint64_t k = 0; k < n; ++k) {
      std::string_view key;
      if (!r.bytes(key)) return failed(r.error());
      if (!state::valid_key_bytes(key, names)) return failed("a malformed key");
      const std::uint64_t hash = state::hash_key_bytes(key);
      if (state::key_group_of(hash, rows_->max_parallelism()) != key_group)
        return failed("a key of another key group");
      std::int64_t last_seen = now;
      if (has_last_seen == 1 && !r.zigzag(last_seen)) return failed(r.error());
      auto [row, inserted] = load->rows_.try_emplace(key, hash);
      if (!inserted) return failed("a key twice");
      row->create(aggregates_);
      std::string_view rest = r.rest();
      if (auto d = aggregates_.deserialize(row->block(), rest); !d) return failed("aggregates: " + d.error());
      r.skip(r.remaining() - rest.size());
      row->touch(last_seen);
    }
    if (!r.at_end()) return failed(std::to_string(r.remaining()) + " bytes after the state");
    return load;
  }

  // Applies a keyed_delta segment (snapshot_key_group_delta) to a group being loaded; safe on
  // any thread, as load_group. On a failure the load is half-applied: it is dropped.
  Result<void> apply_delta(GroupLoad& load, std::string_view data) const {
    state::StateReader r(data);
    std::uint8_t has_last_seen = 0;
    std::uint64_t n = 0;
    if (!r.header('r') || !r.u8(has_last_seen) || !r.count(n, 2)) return fail(r.error());
    if (has_last_seen > 1) return fail("bad flags byte");
    state::FieldNames names;
    const std::int64_t now = ctx_.now_ms();
    auto check = [&](std::string_view key, std::uint64_t& hash) -> Result<void> {
      if (!state::valid_key_bytes(key, names)) return fail("a malformed key");
      hash = state::hash_key_bytes(key);
      if (state::key_group_of(hash, rows_->max_parallelism()) != load.group_) return fail("a key of another key group");
      return {};
    };
    for (std::uint64_t k = 0; k < n; ++k) {
      std::string_view key;
      std::uint64_t hash = 0;
      if (!r.bytes(key)) return fail(r.error());
      if (auto ok = check(key, hash); !ok) return ok;
      std::int64_t last_seen = now;
      if (has_last_seen == 1 && !r.zigzag(last_seen)) return fail(r.error());
      if (load.rows_.contains(key, hash)) load.rows_.erase(key, hash);
      auto [row, inserted] = load.rows_.try_emplace(key, hash);
      row->create(aggregates_);
      std::string_view rest = r.rest();
      if (auto d = aggregates_.deserialize(row->block(), rest); !d) return fail("aggregates: " + d.error());
      r.skip(r.remaining() - rest.size());
      row->touch(last_seen);
    }
    if (!r.count(n, 1)) return fail(r.error());
    for (std::uint64_t k = 0; k < n; ++k) {
      std::string_view key;
      std::uint64_t hash = 0;
      if (!r.bytes(key)) return fail(r.error());
      if (auto ok = check(key, hash); !ok) return ok;
      load.rows_.erase(key, hash);
    }
    if (!r.at_end()) return fail(std::to_string(r.remaining()) + " bytes after the delta");
    return {};
  }

  void expire(std::int64_t now) {
    last_sweep_ = now;
    const state::KeyGroupRange range = rows_->key_group_range();
    for (std::uint32_t group = range.first; group < range.end; ++group) {
      // Deferred snapshots: a frozen group is serialised as the barrier left it before a row of
      // it goes; one with nothing to expire is left frozen (reading it is safe beside the writer).
      if (freezer_.unsettled(group) && !has_expired_row(group, now)) continue;
      freezer_.thaw(group);
      if (rows_->erase_if_in_group(group, [&](std::string_view key, Row& row) {
            if (now - row.last_seen() < ttl_ms_) return false;
            // An erased row takes its mark along: recorded whether marked or not.
            if (entries_.recording(group)) entries_.record(group, key, state::hash_key_bytes(key), rows_->group_size(group));
            return true;
          }) > 0)
        changed_.mark(group);
    }
  }

  bool has_expired_row(std::uint32_t group, std::int64_t now) const {
    bool expired = false;
    rows_->for_each_in_group(group, [&](std::string_view, const Row& row) {
      expired = expired || now - row.last_seen() >= ttl_ms_;
    });
    return expired;
  }

  KeyFields key_;
  Aggregates aggregates_;
  // A row as the keyed segment and the delta hold it: bytes key, zigzag last_seen when the
  // ttl is on, the aggregates block.
  void write_row(std::string_view key, const Row& row, std::string& out) const {
    state::StateWriter w(out);
    w.bytes(key);
    if (ttl_ms_ > 0) w.zigzag(row.last_seen());
    aggregates_.serialize(row.block(), out);
  }
  static void write_delta_header(state::StateWriter& w, bool with_ttl) {
    w.header('r');
    w.u8(with_ttl ? 1 : 0);
  }
  // A changed group's rows as take_changed_entries serialised them, and the keys of those
  // erased (the delta's two lists, without their counts).
  struct RowCapture {
    std::string written;
    std::size_t rows = 0;
    std::string erased;
    std::size_t erased_rows = 0;
    std::size_t size() const { return rows + erased_rows; }
  };

  // A capture as a deferred snapshot's copy of the group's delta, serialised by the writer.
  static state::FrozenKeyGroups::GroupCopy copy_of(RowCapture&& c, bool with_ttl) {
    const std::size_t bytes = c.written.capacity() + c.erased.capacity();
    return state::FrozenKeyGroups::GroupCopy{[with_ttl, copy = std::move(c)](std::string& out) {
                                               state::StateWriter w(out);
                                               write_delta_header(w, with_ttl);
                                               w.varint(copy.rows);
                                               out.append(copy.written);
                                               w.varint(copy.erased_rows);
                                               out.append(copy.erased);
                                             },
                                             bytes};
  }

  // Deferred snapshots: the take of changed rows left unresolved (state/pending_take.hpp).
  using PendingTake = state::PendingTake<1>;

  void take_pending(std::vector<state::GroupEntries>& out) {
    std::vector<state::GroupLog> logs;
    entries_.take_logs(logs, [&](std::uint32_t group) { rows_->unmark_group(group); });
    pending_take_ = PendingTake::make(
        std::move(logs), out, [&](std::uint32_t g) { return PendingTake::Epochs{rows_->begin_pending(g)}; },
        [&](std::uint32_t g, const PendingTake::Epochs&) { rows_->unmark_group(g); }); // no free epoch: scanned
  }
  void abandon_pending(std::uint32_t g, const PendingTake::Epochs& epochs) { rows_->abandon_pending(g, epochs[0]); }

  // The groups of the pending take that the plan writes as deltas are frozen, to be resolved
  // later (each serialised by whichever thread claims it); the others' stamps are given up.
  std::shared_ptr<state::FrozenKeyGroups> freeze_pending_take(const state::DeltaKeys& deltas) {
    std::shared_ptr<PendingTake> take = pending_take_;
    std::vector<std::uint32_t> groups =
        take->freeze(deltas, [this](std::uint32_t g, const PendingTake::Epochs& e) { abandon_pending(g, e); });
    if (groups.empty()) return nullptr;
    frozen_deltas_now_ = true;
    auto serialise = [this, take](std::uint32_t g, std::string& out) {
      copy_of(resolve_pending(*take, g), ttl_ms_ > 0).serialise(out);
    };
    auto copy = [this, take](std::uint32_t g) { return copy_of(resolve_pending(*take, g), ttl_ms_ > 0); };
    return freezer_.freeze(rows_->key_group_range(), std::move(groups), std::move(serialise), std::move(copy));
  }

  // On the thread that claimed frozen group `g`: its changed rows serialised as the barrier
  // left them (their pending stamps cleared), and the keys of those erased.
  RowCapture resolve_pending(PendingTake& take, std::uint32_t g) {
    RowCapture c;
    std::vector<std::string> keys;
    take.resolve(
        g, keys,
        [&](std::string_view key, std::uint64_t hash, const PendingTake::Epochs& epochs) -> std::optional<bool> {
          bool was_pending = false;
          const Row* row = rows_->resolve_pending(key, hash, epochs[0], was_pending);
          if (row == nullptr) return std::nullopt;
          if (was_pending) {
            write_row(key, *row, c.written);
            ++c.rows;
          }
          return was_pending;
        },
        [&](std::string_view, std::uint64_t hash) { rows_->prefetch(hash); });
    // Rows present first, in the order serialised, then those erased (ChangedEntries::resolve).
    state::StateWriter w(c.erased);
    for (std::size_t k = c.rows; k < keys.size(); ++k) w.bytes(keys[k]);
    c.erased_rows = keys.size() - c.rows;
    return c;
  }


  std::int64_t ttl_ms_;
  std::int64_t last_sweep_ = 0;
  std::optional<state::KeyedMap<Row>> rows_;
  state::ChangedGroups changed_; // since the last incremental checkpoint
  state::ChangedEntries entries_; // the same, row by row
  state::DeltaCaptures<RowCapture> captures_; // what the last take_changed_entries serialised
  std::shared_ptr<PendingTake> pending_take_; // the last deferred take, until the next settles it
  bool frozen_deltas_now_ = false;            // freeze_pending_take froze deltas at this barrier
  std::string key_bytes_;
  state::RecordBuilder builder_;
  pipeline::EvalContext eval_;
  // Deferred snapshots: the groups frozen at the last barrier (see freeze_key_groups). Last, so
  // that it is destroyed first (it abandons what is still frozen).
  state::KeyGroupFreezer freezer_;
};

} // namespace

namespace {

// Projection: a reduce's rows are made of its key and aggregates.
std::vector<pipeline::FieldSet> reduce_reads(const pipeline::PipelineSpec&, const pipeline::NodeSpec& node,
                                             const pipeline::FieldSet&, const pipeline::FieldSet&) {
  pipeline::FieldSet reads;
  add_key_fields(reads, node);
  add_aggregate_fields(reads, node);
  return {reads};
}

} // namespace

pipeline::NodeTypeSchema reduce_schema() {
  using pipeline::KeySchema;
  using pipeline::KeyType;
  pipeline::NodeTypeSchema schema{
      "reduce",
      {
          KeySchema{"key", KeyType::StringArray, true, {}, {}, "fields that form the key"},
          KeySchema{"aggregates", KeyType::StringMap, true, {}, {}, "name = \"function(field)\""},
          KeySchema{"ttl", KeyType::Duration, false, {}, {}, "forget keys idle this long"},
      }};
  schema.read_fields = reduce_reads;
  return schema;
}

std::unique_ptr<Operator> make_reduce(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node,
                                      state::FieldNames& names) {
  std::vector<std::pair<std::string, std::string>> entries;
  for (const auto& [name, value] : in_file_order(node.config["aggregates"].as_table()))
    entries.emplace_back(name, value->value_or(std::string()));
  Aggregates aggregates = [&] {
    try {
      return Aggregates::compile(entries, names);
    } catch (const pipeline::ExpressionError& e) {
      throw Error(ErrorKind::Usage, pipeline::position_of(spec, node, "aggregates") + ": operator '" + node.name +
                                        "': " + e.what());
    }
  }();
  return std::make_unique<Reduce>(KeyFields::from_node(spec, node, names), std::move(aggregates),
                                  pipeline::duration_ms_or(node.config.get("ttl"), 0));
}

} // namespace streamctl::operators
