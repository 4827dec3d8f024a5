#include "operators/window.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <new>
#include <optional>
#include <thread>
#include <tuple>
#include <unordered_map>

#include "operators/bad_record.hpp"
#include "operators/field_reads.hpp"
#include "operators/keyed_delta_load.hpp"
#include "operators/session_windows.hpp"
#include "operators/toml_order.hpp"
#include "operators/window_combiner.hpp"
#include "pipeline/spec/snapshot_mode.hpp"
#include "state/changed_entries.hpp"
#include "state/changed_groups.hpp"
#include "state/delta_captures.hpp"
#include "state/barrier_timers.hpp"
#include "state/frozen_key_groups.hpp"
#include "state/key_codec.hpp"
#include "state/key_group.hpp"
#include "state/keyed_map.hpp"
#include "state/pending_take.hpp"
#include "state/recycled_memory.hpp"
#include "state/state_codec.hpp"
#include "state/timer_service.hpp"

namespace streamctl::operators {

namespace {

void append_zigzag_varint(std::string& out, std::int64_t n) {
  std::uint64_t v = (static_cast<std::uint64_t>(n) << 1) ^ static_cast<std::uint64_t>(n >> 63);
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

// Writes what append_zigzag_varint writes so that it ends just before `end` (at most 10 bytes
// before it); returns where it starts.
char* put_zigzag_varint_before(char* end, std::int64_t n) {
  std::uint64_t v = (static_cast<std::uint64_t>(n) << 1) ^ static_cast<std::uint64_t>(n >> 63);
  const int bytes = v == 0 ? 1 : (std::bit_width(v) + 6) / 7;
  char* p = end - bytes;
  for (char* q = p; q + 1 < end; ++q, v >>= 7)
    *q = static_cast<char>((v & 0x7F) | 0x80);
  end[-1] = static_cast<char>(v);
  return p;
}

// Reads an unsigned LEB128 varint from the front of `in`, consuming it.
bool read_varint(std::string_view& in, std::uint64_t& v) {
  v = 0;
  for (unsigned shift = 0; shift < 64 && !in.empty(); shift += 7) {
    const auto byte = static_cast<unsigned char>(in.front());
    in.remove_prefix(1);
    v |= std::uint64_t{byte & 0x7Fu} << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

// Reads what append_zigzag_varint wrote from the front of `in`, consuming it.
bool read_zigzag_varint(std::string_view& in, std::int64_t& n) {
  std::uint64_t v;
  if (!read_varint(in, v)) return false;
  n = static_cast<std::int64_t>(v >> 1) ^ -static_cast<std::int64_t>(v & 1);
  return true;
}

// Decodes a key of scalars (null, bool, int, float and string, with the tags and payloads of
// state/key_codec.hpp) into `out` without allocating (strings are copied into `arena`); false
// for keys with arrays or maps, which state::decode_key_into handles. Firing emits a row per
// window; the general decoder also checks that the bytes are canonical, which firing, decoding
// bytes encode_key wrote, need not.
bool decode_scalar_key(std::string_view bytes, state::Arena& arena,
                       std::vector<state::Value>& out) {
  out.clear();
  std::uint64_t count;
  if (!read_varint(bytes, count)) return false;
  for (std::uint64_t k = 0; k < count; ++k) {
    if (bytes.empty()) return false;
    const auto tag = static_cast<unsigned char>(bytes.front());
    bytes.remove_prefix(1);
    switch (tag) {
    case 0: out.push_back(state::Value::null()); break;
    case 1:
      if (bytes.empty()) return false;
      out.push_back(state::Value::boolean(bytes.front() != 0));
      bytes.remove_prefix(1);
      break;
    case 2: {
      std::int64_t n;
      if (!read_zigzag_varint(bytes, n)) return false;
      out.push_back(state::Value::integer(n));
      break;
    }
    case 3: {
      if (bytes.size() < 8) return false;
      std::uint64_t bits = 0;
      for (int b = 7; b >= 0; --b)
        bits = (bits << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(b)]);
      double f;
      std::memcpy(&f, &bits, sizeof f);
      out.push_back(state::Value::floating(f));
      bytes.remove_prefix(8);
      break;
    }
    case 4: {
      std::uint64_t size;
      if (!read_varint(bytes, size) || size > bytes.size()) return false;
      out.push_back(state::Value::string(arena.copy(bytes.substr(0, size))));
      bytes.remove_prefix(size);
      break;
    }
    default: return false;
    }
  }
  return bytes.empty();
}

} // namespace

// --- what both implementations share ---------------------------------------------------------

WindowOperatorBase::WindowOperatorBase(WindowSettings settings)
    : key_(std::move(settings.key)), key_names_(std::move(settings.key_names)),
      aggregates_(std::move(settings.aggregates)), window_(settings.window),
      window_start_(settings.window_start), window_end_(settings.window_end),
      combinable_(settings.combinable), partial_key_(settings.partial_key),
      partial_state_(settings.partial_state) {}

void WindowOperatorBase::begin_batch(std::int64_t now) {
  eval_arena_.reset();
  eval_.arena = &eval_arena_;
  eval_.now_ms = now;
}

void WindowOperatorBase::emit_row(std::string_view key_bytes, std::int64_t start, std::int64_t end,
                                  const std::byte* block, std::int64_t timestamp,
                                  state::Batch& out) {
  begin_row(key_bytes, start, end, out);
  aggregates_.emit(block, builder_, out);
  builder_.set_timestamp(timestamp);
  builder_.finish(out);
}

void WindowOperatorBase::begin_row(std::string_view key_bytes, std::int64_t start, std::int64_t end,
                                   state::Batch& out) {
  builder_.reset();
  if (!decode_scalar_key(key_bytes, out.arena(), key_values_)) {
    // The bytes come from encode_key, so decoding them cannot fail; nulls keep the row whole
    // if it ever did.
    if (!state::decode_key_into(key_bytes, *ctx_.names, out.arena(), key_values_)) key_values_.clear();
  }
  for (std::size_t k = 0; k < key_names_.size(); ++k)
    builder_.append(key_names_[k], k < key_values_.size() ? key_values_[k] : state::Value::null());
  builder_.append(window_start_, state::Value::integer(start));
  builder_.append(window_end_, state::Value::integer(end));
}

bool WindowOperatorBase::partial_of(const state::Record& record, std::string_view& key,
                                    std::string_view& block) const {
  if (!combinable_ || record.size != 2 || record.fields[0].name != partial_key_ ||
      record.fields[1].name != partial_state_ || record.fields[0].value.kind != state::Kind::String ||
      record.fields[1].value.kind != state::Kind::String)
    return false;
  key = record.fields[0].value.str();
  block = record.fields[1].value.str();
  return true;
}

void WindowOperatorBase::bad_partial(std::string_view key_bytes, std::int64_t pane_start,
                                     std::string_view reason) {
  // The partial's own fields are bytes: what a person reads is its key and its pane.
  state::Batch row;
  begin_row(key_bytes, pane_start, pane_start + window_.slide, row);
  builder_.set_timestamp(pane_start);
  builder_.finish(row);
  report_bad_record(ctx_, row[0],
                    std::string(reason) +
                        " (records of this key and pane, combined before the key exchange; "
                        "`combine = false` reports each record)");
}

void WindowOperatorBase::late_record(const state::Batch& in, const state::Record& record,
                                     bool& retained) {
  if (ctx_.late_output != nullptr) {
    if (!retained) ctx_.late_output->retain_memory_of(in);
    retained = true;
    ctx_.late_output->add_shared(record);
    return;
  }
  report_bad_record(ctx_, record,
                    "late record: event time " + std::to_string(record.timestamp) +
                        " is behind the watermark " + std::to_string(watermark_) +
                        " for every window it belongs to (allowed_lateness " +
                        std::to_string(window_.allowed_lateness) + "ms)");
}

void WindowOperatorBase::out_of_range(const state::Record& record, std::int64_t time) {
  report_bad_record(ctx_, record,
                    "time " + std::to_string(time) +
                        " is outside the range of times windows support (about ±146 million years "
                        "around 1970)");
}

// Subtask state: the watermark, which decides which windows have fired and which records are
// late. It is not keyed, so it is written once per subtask:
//   header   version 1, kind 'W'
//   zigzag   the watermark (INT64_MIN before the first)
// The runtime does not replay watermarks (sources rewind to their positions and start their
// watermarks afresh), so without it a restored window would take late records and re-fire or
// lose updates of windows that fired before the checkpoint. Barriers are aligned, so every old
// subtask saw the same watermarks before its barrier; a restore takes the lowest of them (all
// equal in practice; the lowest is the safe choice: no record is refused that an old subtask
// would have taken).
void WindowOperatorBase::snapshot_subtask_state(std::string& out) const {
  state::StateWriter w(out);
  w.header('W');
  w.zigzag(watermark_);
}

Result<void> WindowOperatorBase::restore_subtask_state(
    const std::vector<std::string_view>& old_subtasks) {
  std::optional<std::int64_t> lowest;
  for (std::size_t k = 0; k < old_subtasks.size(); ++k) {
    if (old_subtasks[k].empty()) continue;
    state::StateReader r(old_subtasks[k]);
    std::int64_t w;
    if (!r.header('W') || !r.zigzag(w))
      return restore_failure(-1, "old subtask " + std::to_string(k) + ": " + r.error());
    if (!r.at_end())
      return restore_failure(-1, "old subtask " + std::to_string(k) + ": bytes after the state");
    lowest = lowest ? std::min(*lowest, w) : w;
  }
  if (lowest && *lowest > watermark_) watermark_ = *lowest;
  return {};
}

Failure WindowOperatorBase::restore_failure(std::int64_t key_group, const std::string& why) const {
  return fail("operator '" + (ctx_.node ? ctx_.node->name : std::string("?")) +
              "' (window): cannot restore " +
              (key_group >= 0 ? "key group " + std::to_string(key_group)
                              : std::string("its subtask state")) +
              ": " + why);
}

namespace {

// --- tumbling and sliding windows --------------------------------------------------------------
//
// State: per time domain, a KeyedMap from (window start, key) to the window's aggregates block:
//
//   map key:  the window start as a zigzag varint (LEB128, low group first, as in
//             state/key_codec.hpp), then the key's canonical bytes (key_codec)
//   hash:     window_hash(): congruent to hash_key_bytes(key bytes) modulo max_parallelism, so
//             that a key's windows live in the key's key group, its other bits mixed from the
//             key hash and the start so that the windows of one key do not share a home slot
//   value:    Cell<N>: the block inline when it fits in N bytes, else a pointer to it. N is
//             the least of 8, 16, 24 and 32 that holds the block (8, holding a pointer, when
//             none does), so that a count's slot is 32 bytes (8 hash, 16 key, 8 count) rather
//             than 64, and a count and a sum's 48 rather than 64: at 10 M keys the table is
//             most of the operator's memory, and a restore's time goes mostly to the kernel
//             clearing the pages of the tables (perf: clear_page_erms)
//
// Timers: one per key group, time domain and time, not one per window: key empty, hash = the
// key group's number, tag = the window end. (A TimerService operation costs about ten map
// updates, and a tumbling count over many keys makes about one window per record.) A timer at
// time == tag fires every window of its key group that ends there, emitting their rows; with
// allowed_lateness > 0 (event time) it then registers the group's timer at end +
// allowed_lateness, which drops them. Firing scans the group's table, so that sliding windows
// visit about size/slide entries per row they emit. Whether a window has fired follows from
// the watermark: end <= watermark.

// A window's aggregates block, or a pointer to it. Blocks are trivially relocatable, so the
// map may move a Cell as bytes; the operator inits and destroys the blocks.
template <std::size_t N> struct alignas(N >= 32 ? 16 : 8) Cell {
  std::byte bytes[N];
};
static_assert(std::is_trivially_copyable_v<Cell<8>> && sizeof(Cell<8>) == 8);
static_assert(sizeof(Cell<16>) == 16 && sizeof(Cell<24>) == 24 && sizeof(Cell<32>) == 32);

std::uint64_t mix64(std::uint64_t x) { // splitmix64's finaliser
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

__extension__ using Uint128 = unsigned __int128;

template <typename Cell> class AlignedWindows final : public WindowOperatorBase {
public:
  explicit AlignedWindows(WindowSettings settings)
      : WindowOperatorBase(std::move(settings)),
        inline_blocks_(aggregates_.state_bytes() <= sizeof(Cell) &&
                       aggregates_.block_align() <= alignof(Cell)) {}

  ~AlignedWindows() override {
    freezer_.abandon(); // no other thread reads a group from here on
    for (Domain& d : domains_)
      if (d.windows)
        d.windows->for_each([&](std::string_view, Cell& cell) { destroy_block(cell); });
  }

  void open(OperatorContext& ctx) override {
    Operator::open(ctx);
    max_parallelism_ = static_cast<std::uint32_t>(ctx.pipeline->max_parallelism);
    group_of_ = state::KeyGroupOf(max_parallelism_);
    spread_ = UINT64_MAX / max_parallelism_ - 1;
    range_ = state::key_group_range(ctx.subtask, ctx.parallelism, max_parallelism_);
    for (Domain& d : domains_) {
      d.windows.emplace(range_, max_parallelism_);
      d.windows->set_write_check(&freezer_);
      d.registered.assign(range_.size() * registered_ways_, GroupTimer{INT64_MIN, INT64_MIN});
    }
    timers_.emplace(range_, max_parallelism_);
    changed_ = state::ChangedGroups(range_);
    entries_ = state::ChangedEntries(range_);
    captures_ = state::DeltaCaptures<DeltaCapture>(range_);
  }

  void process(const state::Batch& in, state::Batch& out) override {
    if (prepare_copies_) [[unlikely]]
      prepare_copy_memory();
    const std::int64_t now = ctx_.now_ms();
    begin_batch(now);
    plan(in, now);
    aggregates_.prepare(std::span<const state::Record>(in.begin(), in.end()), eval_);
    batch_ = &in;
    bool retained = false;
    for (std::size_t i = 0; i < in.size(); ++i) {
      // The map slots of a record a few ahead start loading while this one is handled.
      if (i + prefetch_distance_ < in.size()) prefetch(pending_[i + prefetch_distance_]);
      const Pending& p = pending_[i];
      const state::Record& record = in[i];
      if (p.action == Action::OutOfRange) {
        out_of_range(record, p.t);
        continue;
      }
      if (p.action == Action::Late) {
        // A partial is sent before its windows fire (window_combiner.hpp): this cannot happen
        // unless a sender broke that promise, and then it is not a record to pass on.
        if (p.partial)
          bad_partial(pending_key(p), p.t, "late partial aggregate: the watermark " + std::to_string(watermark_) +
                                                " passed every window it belongs to");
        else
          late_record(in, record, retained);
        continue;
      }
      if (p.action == Action::BadKey) continue; // reported by plan()
      // Processing-time windows are never late: a record's windows contain its arrival.
      const std::int64_t lateness = p.event ? window_.allowed_lateness : 0;
      const std::int64_t watermark = p.event ? watermark_ : INT64_MIN;
      for (std::int64_t start = p.last_start; start > p.t - window_.size; start -= window_.slide) {
        const std::int64_t end = start + window_.size;
        if (end + lateness <= watermark) break; // this one and every earlier one are late
        if (!add(p, i, start, end, out)) {
          if (p.partial)
            bad_partial(pending_key(p), p.t, eval_.error);
          else
            report_bad_record(ctx_, record, eval_.error);
          break;
        }
      }
    }
  }

  void on_watermark(std::int64_t watermark, state::Batch& out) override {
    watermark_ = std::max(watermark_, watermark);
    Domain& d = domains_[event_domain];
    if (window_.allowed_lateness > 0) {
      timers_->advance_watermark(watermark_, [&](std::string_view, std::uint64_t group,
                                                 std::int64_t time, std::int64_t end) {
        fire(d, true, static_cast<std::uint32_t>(group), time, end, out);
      });
      return;
    }
    // Without lateness a window goes once its end is at or below the watermark, so the groups
    // with a due timer are each scanned once for every window due, not once per window end: a
    // watermark comes with a batch and may pass many slides at once (ten at Nexmark q5's
    // speed), and each scan visits every window of the group.
    due_groups_.clear();
    timers_->advance_watermark(watermark_, [&](std::string_view, std::uint64_t group,
                                               std::int64_t time, std::int64_t end) {
      const auto g = static_cast<std::uint32_t>(group);
      GroupTimer& last = registered(d, g, end);
      if (last == GroupTimer{time, end}) last = GroupTimer{INT64_MIN, INT64_MIN};
      if (due_groups_.empty() || due_groups_.back() != g) due_groups_.push_back(g);
    });
    if (due_groups_.size() > 1) {
      std::sort(due_groups_.begin(), due_groups_.end());
      due_groups_.erase(std::unique(due_groups_.begin(), due_groups_.end()), due_groups_.end());
    }
    for (std::uint32_t group : due_groups_) fire_due(d, group, out);
  }

  void on_processing_time(std::int64_t now, state::Batch& out) override {
    timers_->advance_processing_time(now, [&](std::string_view, std::uint64_t group,
                                              std::int64_t time, std::int64_t end) {
      fire(domains_[processing_domain], false, static_cast<std::uint32_t>(group), time, end, out);
    });
  }

  void finish(state::Batch& out) override {
    on_watermark(INT64_MAX, out);
    on_processing_time(INT64_MAX, out);
  }

  // Key-group segment:
  //   header    version 1, kind 'A'
  //   zigzag    size, zigzag slide (must match the restoring node's)
  //   twice (event time, then processing time):
  //     varint  window count
  //     per window: zigzag start, bytes key (canonical key bytes), the aggregates block
  //   timers    (state_codec.hpp): the group timers, key empty, tag = window end
  // On restore each window is filed again under window_hash(group, hash_key_bytes(key), start)
  // and each group timer re-registered with hash = the group number, as on insert.
  StateFootprint state_footprint() const override {
    StateFootprint f;
    for (const Domain& d : domains_)
      if (d.windows) {
        f.entries += d.windows->size();
        f.bytes += d.windows->memory_bytes();
      }
    if (timers_) f.bytes += timers_->memory_bytes();
    return f;
  }

  void snapshot_key_group(std::uint32_t key_group, std::string& out) const override {
    if (!range_.contains(key_group) || group_is_empty(key_group)) return;
    write_windows(key_group, out);
    state::StateWriter(out).timers(*timers_, key_group);
  }

  // Deferred snapshots (Operator::freeze_key_groups). The windows of a group are in its own
  // tables, which the writer's thread may read while the task changes other groups' tables; the
  // timers of every group share one TimerService, which it may not: so the timers' bytes (the
  // end of the segment), and whether the segment is empty, are taken now, the windows later.
  //
  // Every path that changes a group's tables or timers, and where it thaws the group first:
  //   - a record for a key of the group (process → add): plan(), where the record's group is
  //     resolved, before any of the batch's records is added;
  //   - a timer of the group that fires (on_watermark, on_processing_time, finish; a window's
  //     rows, purge after allowed_lateness; the timer it registers next): fire();
  //   - the next checkpoint's change bookkeeping (take_changed_entries unmarks entries):
  //     thaw_all; its snapshot (snapshot_key_group, a delta, freeze_key_groups) only reads,
  //     and freeze_key_groups thaws the earlier freeze first;
  //   - a rescale that keeps this worker: take_key_group_from thaws the donor's group;
  //   - a restore (GroupLoad::install) thaws the group it fills (none is frozen before the
  //     first snapshot, but a restore never runs after one either);
  //   - destruction: abandon, which waits for a group the writer is at.
  // The maps' write check (KeyedMap::set_write_check) asserts in debug builds that no change
  // reaches a group still frozen. Timers are not checked: the writer never reads them.
  std::shared_ptr<state::FrozenKeyGroups> freeze_key_groups(const std::vector<std::uint32_t>& groups) override {
    // The earlier freeze's groups are the task's again before timers are read; but not the
    // deltas this barrier froze (freeze_pending_take), which stay frozen beside these.
    const bool beside_deltas = std::exchange(frozen_deltas_now_, false);
    if (!beside_deltas) freezer_.thaw_all();
    copy_memory_->age();
    auto timers = std::make_shared<const state::BarrierTimers>(range_, groups, *timers_,
                                                               [this](std::uint32_t g) { return group_is_empty(g); });
    auto serialise = [this, timers](std::uint32_t g, std::string& out) {
      const std::string* tail = timers->of(g);
      if (!tail) return; // empty at the barrier
      write_windows(g, out);
      out.append(*tail);
    };
    // Copy-on-first-write where blocks are inline and own no heap memory, so that a group's
    // tables are plain bytes (other blocks would need a deep copy: those groups are serialised
    // on first write instead).
    state::FrozenKeyGroups::Copy copy;
    if (inline_blocks_ && aggregates_.plain_bytes())
      copy = [this, timers](std::uint32_t g) { return copy_group(g, timers); };
    if (beside_deltas) return freezer_.freeze_also(range_, groups, std::move(serialise), std::move(copy));
    return freezer_.freeze(range_, groups, std::move(serialise), std::move(copy));
  }

  // A deferred snapshot's copy of group `g`'s tables, serialised later on the writer's thread
  // (it reads this operator's configuration there, which nothing changes; abandon() waits for it).
  state::FrozenKeyGroups::GroupCopy copy_group(std::uint32_t g,
                                               const std::shared_ptr<const state::BarrierTimers>& timers) {
    if (!timers->of(g)) return {[](std::string&) {}, 0}; // empty at the barrier
    auto copies = std::make_shared<CopiedGroup>(g, max_parallelism_, copy_memory_);
    std::size_t bytes = 0;
    for (int di : {event_domain, processing_domain}) {
      domains_[di].windows->copy_group_into(g, copies->windows[di]);
      bytes += copies->windows[di].memory_bytes();
    }
    return {[this, g, timers, copies](std::string& out) {
              write_windows(g, {&copies->windows[event_domain], &copies->windows[processing_domain]}, out);
              out.append(*timers->of(g));
            },
            bytes};
  }

  // After a restore (GroupLoad::install set prepare_copies_), when deferred snapshots may copy
  // groups: fills the copy memory with blocks of the restored tables' shapes, on a thread of
  // its own, so that the first checkpoint's copies do not fault in fresh pages on the task's
  // thread (state/recycled_memory.hpp). As much as the pool keeps (the copy budget); the
  // checkpoints' use ages out the rest.
  void prepare_copy_memory() {
    prepare_copies_ = false;
    if (!(inline_blocks_ && aggregates_.plain_bytes())) return;
    if (ctx_.pipeline == nullptr || !pipeline::deferred_snapshots_of(*ctx_.pipeline)) return;
    std::vector<std::size_t> sizes;
    for (std::uint32_t g = range_.first; g < range_.end; ++g)
      for (const Domain& d : domains_)
        if (std::size_t bytes = d.windows->group_table_bytes(g); bytes > 0) sizes.push_back(bytes);
    if (sizes.empty()) return;
    copy_preparer_ = state::prepare_in_background(copy_memory_, std::move(sizes), Windows::table_align());
  }

  bool take_changed_key_groups(std::vector<std::uint32_t>& out) override {
    changed_.take(out);
    return true;
  }

  // Key-group delta segment (keyed_delta, state/snapshot_format.hpp): the windows of the
  // group that changed since an earlier snapshot of it, against the group as that left it:
  //   header    version 1, kind 'a'
  //   zigzag    size, zigzag slide (must match the restoring node's)
  //   twice (event time, then processing time):
  //     varint  U = windows written; per window: zigzag start, bytes key, the aggregates
  //             block (as in the keyed segment): the window now, inserted or replacing
  //     varint  E = windows erased (fired, or dropped after allowed_lateness); per window:
  //             zigzag start, bytes key (one that is absent already is no error: a window
  //             made and fired between two snapshots)
  //   timers    (state_codec.hpp): every group timer of the group now, replacing the earlier
  // A changed entry is tracked (state/changed_entries.hpp) under the bytes: u8 domain (0
  // event time, 1 processing time), then the map key; and under the window's map hash. Its
  // mark is in its domain's map.
  //
  // Deferred snapshots (`deferred`), where blocks are inline bytes: the keys are left
  // unresolved at the barrier (a random probe each, 60 ms for 330 k changed windows among
  // 33 M: issue 12's pause). Each group moves to a new mark epoch (KeyedMap::begin_pending) and
  // keeps its log, and defer_key_group_deltas freezes the groups the plan writes as deltas:
  // the writer's thread resolves each (finds its logged windows, clears their pending stamps,
  // copies them) and serialises its delta, unless the task changes the group first and
  // resolves and copies it then (thaw). A group with no free epoch is written whole.
  bool take_changed_entries(std::vector<state::GroupEntries>& out, bool deferred) override {
    freezer_.thaw_all(); // unmarking writes the groups' slots
    captures_.drop();
    frozen_deltas_now_ = false;
    state::settle(pending_take_,
                  [this](std::uint32_t g, const PendingTake::Epochs& e) { abandon_pending(g, e); });
    // Where blocks are inline bytes, the unmark's probe copies each changed window too, so that
    // its delta is serialised later from the copy (defer_key_group_deltas) instead of found
    // again and serialised at the barrier.
    const bool capture = inline_blocks_ && aggregates_.plain_bytes();
    if (deferred && capture) {
      take_pending(out);
      return true;
    }
    const std::size_t first = out.size();
    entries_.take(
        out,
        [&](std::string_view tracked, std::uint64_t hash) -> std::optional<bool> {
          const int di = static_cast<unsigned char>(tracked[0]);
          if (!capture) return domains_[di].windows->unmark(tracked.substr(1), hash);
          bool was_marked = false;
          const Cell* cell = domains_[di].windows->unmark_find(tracked.substr(1), hash, was_marked);
          if (cell == nullptr) return std::nullopt;
          if (was_marked) captures_.of(group_of_(hash)).add_written(tracked, *cell);
          return was_marked;
        },
        [&](std::uint32_t group) {
          for (Domain& d : domains_) d.windows->unmark_group(group);
        },
        [&](std::string_view tracked, std::uint64_t hash) {
          domains_[static_cast<unsigned char>(tracked[0])].windows->prefetch(hash);
        });
    if (capture) {
      // A take gives a group's keys present and marked first, in the order copied, then those
      // erased (ChangedEntries::take).
      for (std::size_t i = first; i < out.size(); ++i) {
        DeltaCapture& c = captures_.of(out[i].key_group);
        for (std::size_t k = c.written; k < out[i].keys.size(); ++k) c.add_erased(out[i].keys[k]);
      }
      captures_.mark_fresh();
    }
    return true;
  }

  std::shared_ptr<state::FrozenKeyGroups> defer_key_group_deltas(const state::DeltaKeys& deltas) override {
    if (pending_take_ && !pending_take_->frozen()) return freeze_pending_take(deltas);
    return captures_.defer(
        deltas, freezer_, [this](std::uint32_t group, std::size_t changed) { return delta_pays(group, changed); },
        [this](std::uint32_t group, DeltaCapture&& c) {
          std::string timers;
          state::StateWriter(timers).timers(*timers_, group); // shared by every group: read now
          const std::size_t bytes = c.memory_bytes() + timers.size();
          return state::FrozenKeyGroups::GroupCopy{
              [this, copy = std::move(c), timers = std::move(timers)](std::string& out) {
                write_captured_delta(copy, timers, out);
              },
              bytes};
        });
  }

  bool snapshot_key_group_delta(std::uint32_t key_group, const std::vector<std::string>& keys,
                                std::string& out) const override {
    if (!range_.contains(key_group)) return false;
    // Much of the group changed (the keys of several takes): written whole, which is cheaper
    // to write than a delta of as many entries (state/changed_entries.hpp).
    if (!delta_pays(key_group, keys.size())) return false;
    state::StateWriter w(out);
    write_delta_header(w);
    DeltaEntries entries;
    std::vector<std::pair<std::string_view, std::uint64_t>> probes; // map key, hash
    for (int di = 0; di < 2; ++di) {
      entries.clear();
      probes.clear();
      for (const std::string& tracked : keys) {
        if (tracked.empty() || static_cast<int>(static_cast<unsigned char>(tracked[0])) != di) continue;
        std::string_view map_key = std::string_view(tracked).substr(1);
        std::string_view key = map_key;
        std::int64_t start = 0;
        if (!read_zigzag_varint(key, start)) continue; // cannot be: we made it
        probes.emplace_back(map_key, window_hash(key_group, state::hash_key_bytes(key), start));
      }
      // Hashed first, so that the finds' cache misses overlap (KeyedMap::find_each).
      domains_[di].windows->find_each(probes, [&](std::size_t i, const Cell* cell) {
        if (cell) entries.written.emplace_back(probes[i].first, cell);
        else entries.erased.push_back(probes[i].first);
      });
      write_delta_domain(w, entries, out);
    }
    w.timers(*timers_, key_group);
    return true;
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

  Result<std::unique_ptr<KeyGroupLoad>> load_key_group_with_deltas(
      std::uint32_t key_group, std::string_view data,
      const std::vector<std::string_view>& deltas) const override {
    if (!range_.contains(key_group)) return restore_failure(key_group, "not a key group of this subtask");
    return KeyedDeltaLoad::load(*this, key_group, data, deltas);
  }

  // The donor's tables of the group move as they are (KeyedMap::adopt_group); blocks are
  // laid out by the aggregates, which are the donor's configuration and so this one's (the
  // same node of the same pipeline, but for its parallelism). Its group timers are copied.
  std::unique_ptr<KeyGroupLoad> take_key_group_from(Operator& donor_op, std::uint32_t key_group) const override {
    auto* donor = dynamic_cast<AlignedWindows*>(&donor_op);
    if (donor == nullptr || !donor->range_.contains(key_group) || !range_.contains(key_group) ||
        donor->max_parallelism_ != max_parallelism_ || donor->window_.size != window_.size ||
        donor->window_.slide != window_.slide || donor->aggregates_.state_bytes() != aggregates_.state_bytes())
      return nullptr;
    donor->freezer_.thaw(key_group); // its tables move out
    // Stamps the donor's deferred take left pending leave with the tables, stale.
    state::give_up_group(donor->pending_take_, key_group,
                         [donor](std::uint32_t g, const PendingTake::Epochs& e) { donor->abandon_pending(g, e); });
    auto load = std::make_unique<GroupLoad>(const_cast<AlignedWindows&>(*this), key_group);
    for (int di = 0; di < 2; ++di) {
      Windows& from = *donor->domains_[di].windows;
      if (from.group_size(key_group) == 0) continue;
      load->windows_[di].adopt_group(key_group, from);
      // As a restored entry: unmarked (incremental checkpoints track changes from the restore).
      load->windows_[di].unmark_group(key_group);
    }
    donor->timers_->for_each_in_group(key_group, [&](const state::TimerView& t) {
      load->timers_.push_back(state::StoredTimer{t.domain, {}, t.timestamp, t.tag});
    });
    for (const auto& t : load->timers_) { // group timers: hash = the group (schedule())
      if (t.domain == state::TimeDomain::EventTime)
        donor->timers_->delete_event_time({}, key_group, t.timestamp, t.tag);
      else
        donor->timers_->delete_processing_time({}, key_group, t.timestamp, t.tag);
    }
    return load;
  }

private:
  friend KeyedDeltaLoad; // load_key_group_with_deltas (ordinary lookup: not a new class here)
  using Windows = state::KeyedMap<Cell>;

  // One key group's windows, decoded into maps of that group alone (Operator::KeyGroupLoad):
  // built on a helper thread, adopted by the operator's maps on the task thread.
  class GroupLoad final : public KeyGroupLoad {
  public:
    GroupLoad(AlignedWindows& self, std::uint32_t group)
        : self_(self), group_(group),
          windows_{Windows({group, group + 1}, self.max_parallelism_),
                   Windows({group, group + 1}, self.max_parallelism_)} {}
    ~GroupLoad() override {
      for (Windows& w : windows_)
        w.for_each([&](std::string_view, Cell& cell) { self_.destroy_block(cell); });
    }

    Result<void> install() override {
      self_.freezer_.thaw(group_);
      self_.prepare_copies_ = true;
      for (int di = 0; di < 2; ++di)
        if (self_.domains_[di].windows->group_size(group_) != 0)
          return self_.restore_failure(group_, "restored twice");
      for (int di = 0; di < 2; ++di)
        if (windows_[di].size() != 0) self_.domains_[di].windows->adopt_group(group_, windows_[di]);
      for (const auto& t : timers_) {
        if (t.domain == state::TimeDomain::EventTime)
          self_.timers_->register_event_time({}, group_, t.timestamp, t.tag);
        else
          self_.timers_->register_processing_time({}, group_, t.timestamp, t.tag);
      }
      return {};
    }

    AlignedWindows& self_;
    std::uint32_t group_;
    Windows windows_[2];
    std::vector<state::StoredTimer> timers_; // keys empty: nothing points into the segment
  };

  // Decodes a key-group segment. Safe on any thread while the task thread does anything but
  // snapshot or process: it reads the operator's configuration only (the aggregates' init and
  // deserialize use no scratch) and builds its own maps. Windows go straight into a table
  // sized once from the count, and the table finds duplicate windows: copying each entry and
  // a second set of every key made a gigabyte of windows restore 26x slower than it reads.
  Result<std::unique_ptr<GroupLoad>> load_group(std::uint32_t key_group, std::string_view data) const {
    const auto failed = [&](const std::string& why) -> Failure {
      return restore_failure(key_group, why);
    };
    if (!range_.contains(key_group)) return failed("not a key group of this subtask");
    state::StateReader r(data);
    std::int64_t size = 0, slide = 0;
    if (!r.header('A') || !r.zigzag(size) || !r.zigzag(slide)) return failed(r.error());
    if (size != window_.size || slide != window_.slide)
      return failed("the windows were " + std::to_string(size) + "ms every " +
                    std::to_string(slide) + "ms, this node's are " + std::to_string(window_.size) +
                    "ms every " + std::to_string(window_.slide) + "ms");
    auto load = std::make_unique<GroupLoad>(const_cast<AlignedWindows&>(*this), key_group);
    state::FieldNames names; // keys are only checked here: their names need not be the task's
    std::string map_key;
    for (int di = 0; di < 2; ++di) {
      Windows& windows = load->windows_[di];
      std::uint64_t n;
      if (!r.count(n, 3)) return failed(r.error());
      if (n > 0) windows.reserve_group(key_group, n);
      for (std::uint64_t k = 0; k < n; ++k) {
        std::int64_t start;
        std::string_view key;
        if (!r.zigzag(start) || !r.bytes(key)) return failed(r.error());
        if (start < min_window_time || start > max_window_time - window_.size ||
            floor_mod(start, window_.slide) != 0)
          return failed("a window start " + std::to_string(start) + " that is not aligned");
        if (!state::valid_key_bytes(key, names)) return failed("a malformed key");
        const std::uint64_t key_hash = state::hash_key_bytes(key);
        if (state::key_group_of(key_hash, max_parallelism_) != key_group)
          return failed("a key of another key group");
        map_key.clear();
        append_zigzag_varint(map_key, start);
        map_key.append(key);
        auto [cell, inserted] = windows.try_emplace(map_key, window_hash(key_group, key_hash, start));
        if (!inserted) return failed("a window twice");
        create_block(*cell);
        std::string_view rest = r.rest();
        if (auto d = aggregates_.deserialize(block_of(*cell), rest); !d)
          return failed("aggregates: " + d.error());
        r.skip(r.remaining() - rest.size());
      }
    }
    if (!r.timers(load->timers_)) return failed(r.error());
    for (const auto& t : load->timers_) {
      if (!t.key.empty()) return failed("a group timer with a key");
      if (t.tag < min_window_time + window_.size || t.tag > max_window_time ||
          floor_mod(t.tag - window_.size, window_.slide) != 0 || t.timestamp < t.tag)
        return failed("a timer for no window end");
    }
    if (!r.at_end()) return failed(std::to_string(r.remaining()) + " bytes after the state");
    return load;
  }

  // Checks a window start and key read from a segment of `key_group`; its map key and hash.
  Result<void> check_window(std::uint32_t key_group, std::int64_t start, std::string_view key,
                            state::FieldNames& names, std::string& map_key, std::uint64_t& hash) const {
    if (start < min_window_time || start > max_window_time - window_.size ||
        floor_mod(start, window_.slide) != 0)
      return fail("a window start " + std::to_string(start) + " that is not aligned");
    if (!state::valid_key_bytes(key, names)) return fail("a malformed key");
    const std::uint64_t key_hash = state::hash_key_bytes(key);
    if (state::key_group_of(key_hash, max_parallelism_) != key_group) return fail("a key of another key group");
    map_key.clear();
    append_zigzag_varint(map_key, start);
    map_key.append(key);
    hash = window_hash(key_group, key_hash, start);
    return {};
  }

  // Applies a keyed_delta segment (snapshot_key_group_delta) to a group being loaded. Safe on
  // any thread, as load_group. On a failure the load is left half-applied: it is dropped.
  Result<void> apply_delta(GroupLoad& load, std::string_view data) const {
    state::StateReader r(data);
    std::int64_t size = 0, slide = 0;
    if (!r.header('a') || !r.zigzag(size) || !r.zigzag(slide)) return fail(r.error());
    if (size != window_.size || slide != window_.slide)
      return fail("the windows were " + std::to_string(size) + "ms every " + std::to_string(slide) +
                  "ms, this node's are " + std::to_string(window_.size) + "ms every " +
                  std::to_string(window_.slide) + "ms");
    state::FieldNames names;
    std::string map_key;
    const std::uint32_t group = load.group_;
    // A window's start and key: its map key into `map_key`, its hash into `h`.
    const auto read_window = [&](std::uint64_t& h) -> Result<void> {
      std::int64_t start;
      std::string_view key;
      if (!r.zigzag(start) || !r.bytes(key)) return fail(r.error());
      return check_window(group, start, key, names, map_key, h);
    };
    for (int di = 0; di < 2; ++di) {
      Windows& windows = load.windows_[di];
      std::uint64_t n;
      if (!r.count(n, 3)) return fail(r.error());
      for (std::uint64_t k = 0; k < n; ++k) {
        std::uint64_t h = 0;
        if (auto ok = read_window(h); !ok) return ok;
        auto [cell, inserted] = windows.try_emplace(map_key, h);
        if (!inserted) destroy_block(*cell);
        create_block(*cell);
        std::string_view rest = r.rest();
        if (auto d = aggregates_.deserialize(block_of(*cell), rest); !d) return fail("aggregates: " + d.error());
        r.skip(r.remaining() - rest.size());
      }
      if (!r.count(n, 2)) return fail(r.error());
      for (std::uint64_t k = 0; k < n; ++k) {
        std::uint64_t h = 0;
        if (auto ok = read_window(h); !ok) return ok;
        if (Cell* cell = windows.find(map_key, h)) {
          destroy_block(*cell);
          windows.erase(map_key, h);
        }
      }
    }
    std::vector<state::StoredTimer> timers;
    if (!r.timers(timers)) return fail(r.error());
    if (auto ok = check_timers(timers); !ok) return ok;
    if (!r.at_end()) return fail(std::to_string(r.remaining()) + " bytes after the delta");
    load.timers_ = std::move(timers);
    return {};
  }

  Result<void> check_timers(const std::vector<state::StoredTimer>& timers) const {
    for (const auto& t : timers) {
      if (!t.key.empty()) return fail("a group timer with a key");
      if (t.tag < min_window_time + window_.size || t.tag > max_window_time ||
          floor_mod(t.tag - window_.size, window_.slide) != 0 || t.timestamp < t.tag)
        return fail("a timer for no window end");
    }
    return {};
  }

  bool group_is_empty(std::uint32_t key_group) const {
    bool any_timer = false;
    timers_->for_each_in_group(key_group, [&](const state::TimerView&) { any_timer = true; });
    return !any_timer && domains_[0].windows->group_size(key_group) == 0 &&
           domains_[1].windows->group_size(key_group) == 0;
  }

  // A key-group segment but its timers (snapshot_key_group). Reads the group's own tables and
  // the configuration only: safe on the writer's thread while the group is frozen.
  void write_windows(std::uint32_t key_group, std::string& out) const {
    write_windows(key_group, {&*domains_[event_domain].windows, &*domains_[processing_domain].windows}, out);
  }
  // The same, from the maps given per domain (the operator's, or a deferred snapshot's copies).
  void write_windows(std::uint32_t key_group, std::array<const Windows*, 2> maps, std::string& out) const {
    state::StateWriter w(out);
    w.header('A');
    w.zigzag(window_.size);
    w.zigzag(window_.slide);
    for (const Windows* map : maps) {
      const Windows& windows = *map;
      w.varint(windows.group_size(key_group));
      windows.for_each_in_group(key_group, [&](std::string_view map_key, const Cell& cell) {
        std::int64_t start = 0;
        read_zigzag_varint(map_key, start);
        w.zigzag(start);
        w.bytes(map_key);
        aggregates_.serialize(block_of(const_cast<Cell&>(cell)), out);
      });
    }
  }

  // Records that the window `map_key` of domain `di` changed for the first time since the last
  // take, or was erased (ChangedEntries).
  void track(int di, std::string_view map_key, std::uint64_t hash, std::uint32_t group) {
    entry_key_.assign(1, static_cast<char>(di));
    entry_key_.append(map_key);
    entries_.record(group, entry_key_, hash,
                    domains_[0].windows->group_size(group) + domains_[1].windows->group_size(group));
  }

  struct GroupTimer {
    std::int64_t time;
    std::int64_t end; // its tag
    bool operator==(const GroupTimer&) const = default;
  };
  // One group's tables, copied for a deferred snapshot (copy_group), per domain, in memory
  // that the next checkpoint's copies reuse.
  struct CopiedGroup {
    CopiedGroup(std::uint32_t g, std::uint32_t max_parallelism, std::shared_ptr<state::RecycledMemory> m)
        : memory(std::move(m)), windows{Windows({g, g + 1}, max_parallelism, memory.get()),
                                        Windows({g, g + 1}, max_parallelism, memory.get())} {}
    std::shared_ptr<state::RecycledMemory> memory; // first: outlives the tables
    std::array<Windows, 2> windows;
  };

  // The groups with a timer due at a watermark (scratch of on_watermark).
  std::vector<std::uint32_t> due_groups_;

  struct Domain {
    std::optional<Windows> windows;
    // Per key group of the range, registered_ways_ group timers registered last, one per
    // window end modulo the ways (scratch: it spares most TimerService lookups, which would
    // find the timer there already).
    std::vector<GroupTimer> registered;
  };
  // A record of a sliding window makes up to size / slide windows with consecutive ends, each
  // with its timer: one way per end keeps all of them, where one entry per group was replaced
  // at every window (a TimerService lookup per new window of Nexmark q5).
  static std::size_t ways_for(const WindowSpec& w) {
    const std::int64_t per_record = w.slide > 0 ? (w.size + w.slide - 1) / w.slide : 1;
    return static_cast<std::size_t>(std::clamp<std::int64_t>(per_record, 1, 8));
  }
  GroupTimer& registered(Domain& d, std::uint32_t group, std::int64_t end) {
    const std::int64_t slot = end / std::max<std::int64_t>(window_.slide, 1);
    const auto way = static_cast<std::size_t>(((slot % std::int64_t(registered_ways_)) + std::int64_t(registered_ways_)) %
                                              std::int64_t(registered_ways_));
    return d.registered[(group - range_.first) * registered_ways_ + way];
  }
  static constexpr int event_domain = 0;
  static constexpr int processing_domain = 1;
  // The most bytes a window start takes in a map key (a zigzag varint of 64 bits).
  static constexpr std::size_t max_start_bytes = 10;
  // How many windows' slots to have loading ahead of the one being updated.
  static constexpr std::int64_t prefetch_windows = 8;

  enum class Action : std::uint8_t { Add, Late, OutOfRange, BadKey };
  // What the first pass over a batch found out about one record.
  struct Pending {
    std::int64_t t;          // event time, or processing time at arrival
    std::int64_t last_start; // of the latest window containing t
    std::uint64_t hash;      // hash_key_bytes of the key
    std::uint64_t slot_hash; // window_hash of the latest window
    std::uint32_t group;     // the key's key group
    std::uint32_t key_begin; // the key bytes: keys_[key_begin, key_begin + key_size), after
                             // max_start_bytes of room for a window start
    std::uint32_t key_size;
    Action action;
    bool event;
    bool partial; // a partial aggregate (window_combiner.hpp), not a record
  };
  std::string_view pending_key(const Pending& p) const { return {keys_.data() + p.key_begin, p.key_size}; }

  Domain& domain(bool event) { return domains_[event ? event_domain : processing_domain]; }

  // The hash a window is filed under in its map (see the top of this section).
  std::uint64_t window_hash(std::uint32_t group, std::uint64_t key_hash, std::int64_t start) const {
    const std::uint64_t m =
        mix64(key_hash ^ (static_cast<std::uint64_t>(start) * 0x9E3779B97F4A7C15ULL));
    const auto q =
        static_cast<std::uint64_t>((Uint128{m} * spread_) >> 64); // uniform in [0, spread_)
    return q * max_parallelism_ + group;
  }

  // Starts loading the map slots of the windows of a record.
  void prefetch(const Pending& p) const {
    if (p.action != Action::Add) return;
    const Windows& windows = *domains_[p.event ? event_domain : processing_domain].windows;
    windows.prefetch(p.slot_hash);
    for (std::int64_t start = p.last_start - window_.slide; start > p.t - window_.size;
         start -= window_.slide)
      windows.prefetch(window_hash(p.group, p.hash, start));
  }

  // window_.last_aligned_start(t, start), but without its 64-bit division when t falls in the
  // same slide as the time before it (most do: the times of a batch are close together).
  bool last_aligned_start(std::int64_t t, std::int64_t& start) {
    if (slide_cached_ && static_cast<std::uint64_t>(t) - static_cast<std::uint64_t>(slide_begin_) <
                             static_cast<std::uint64_t>(window_.slide)) {
      start = slide_begin_;
      return true;
    }
    if (!window_.last_aligned_start(t, start)) return false;
    // Kept when every time of [start, start + slide) is in range, so that the answer for each
    // of them is `start` too.
    std::int64_t ignored;
    slide_cached_ = window_.last_aligned_start(start, ignored) &&
                    window_.last_aligned_start(start + window_.slide - 1, ignored);
    slide_begin_ = start;
    return true;
  }

  // First pass: classifies every record and encodes and hashes the keys of those to add.
  void plan(const state::Batch& in, std::int64_t now) {
    pending_.resize(in.size());
    keys_.clear();
    key_.prepare(std::span<const state::Record>(in.begin(), in.end()));
    for (std::size_t i = 0; i < in.size(); ++i) {
      const state::Record& record = in[i];
      Pending& p = pending_[i];
      p.event = record.timestamp != state::kNoTimestamp;
      p.t = p.event ? record.timestamp : now;
      if (!last_aligned_start(p.t, p.last_start)) {
        p.action = Action::OutOfRange;
        continue;
      }
      std::string_view partial_key, partial_block;
      p.partial = p.event && partial_of(record, partial_key, partial_block);
      if (p.event && p.last_start + window_.size + window_.allowed_lateness <= watermark_) {
        p.action = Action::Late; // even for its latest window
        if (!p.partial) continue;
      } else {
        p.action = Action::Add;
      }
      // Room for a window start before the key, where add() writes it to make the map key.
      const std::size_t room = keys_.size();
      keys_.grow(max_start_bytes);
      if (p.partial) {
        std::memcpy(keys_.grow(partial_key.size()), partial_key.data(), partial_key.size());
      } else if (!key_.append_at(i, record, *ctx_.names, keys_)) {
        keys_.truncate(room);
        report_bad_record(ctx_, record, key_.error());
        p.action = Action::BadKey;
        continue;
      }
      p.key_begin = static_cast<std::uint32_t>(room + max_start_bytes);
      p.key_size = static_cast<std::uint32_t>(keys_.size() - p.key_begin);
      p.hash = state::hash_key_bytes(std::string_view(keys_.data() + p.key_begin, p.key_size));
      p.group = group_of_(p.hash);
      freezer_.thaw(p.group); // add() changes it (deferred snapshots)
      p.slot_hash = window_hash(p.group, p.hash, p.last_start);
      if (p.action == Action::Late) continue; // a partial, reported by process() with its key
      if (p.partial && !range_.contains(p.group)) {
        bad_partial(partial_key, p.t, "partial aggregate of a key this subtask does not own");
        p.action = Action::BadKey;
      }
    }
  }

  std::byte* create_block(Cell& cell) const {
    std::byte* block = cell.bytes;
    if (!inline_blocks_) {
      block = static_cast<std::byte*>(
          ::operator new(aggregates_.state_bytes(), std::align_val_t(aggregates_.block_align())));
      std::memcpy(cell.bytes, &block, sizeof block);
    }
    aggregates_.init(block);
    return block;
  }
  std::byte* block_of(Cell& cell) const {
    if (inline_blocks_) return cell.bytes;
    std::byte* block;
    std::memcpy(&block, cell.bytes, sizeof block);
    return block;
  }
  void destroy_block(Cell& cell) const {
    std::byte* block = block_of(cell);
    aggregates_.destroy(block);
    if (!inline_blocks_) ::operator delete(block, std::align_val_t(aggregates_.block_align()));
  }

  // Registers the timer of `group` at `time` for the windows ending at `end`.
  void schedule(Domain& d, bool event, std::uint32_t group, std::int64_t time, std::int64_t end) {
    GroupTimer& last = registered(d, group, end);
    if (last == GroupTimer{time, end}) return;
    last = GroupTimer{time, end};
    if (event)
      timers_->register_event_time({}, group, time, end);
    else
      timers_->register_processing_time({}, group, time, end);
  }

  // Adds record `row` of the batch to its window [start, end), making the window when new;
  // false (eval_.error says why) when the record cannot be added, and then nothing changed.
  bool add(const Pending& p, std::size_t row, std::int64_t start, std::int64_t end,
           state::Batch& out) {
    Domain& d = domain(p.event);
    char* const key_data = keys_.data() + p.key_begin;
    const std::string_view key(key_data, p.key_size);
    changed_.mark(p.group);
    // The map key: the start, written into the room plan() left before the key bytes.
    char* const map_key_data = put_zigzag_varint_before(key_data, start);
    const std::string_view map_key(map_key_data,
                                   static_cast<std::size_t>(key_data - map_key_data) + p.key_size);
    const std::uint64_t h =
        start == p.last_start ? p.slot_hash : window_hash(p.group, p.hash, start);
    Cell* cell;
    bool inserted;
    if (entries_.recording(p.group)) {
      bool newly_marked;
      std::tie(cell, inserted) = d.windows->try_emplace_marked(map_key, h, newly_marked);
      if (newly_marked) track(p.event ? event_domain : processing_domain, map_key, h, p.group);
    } else {
      std::tie(cell, inserted) = d.windows->try_emplace(map_key, h);
    }
    std::byte* block = inserted ? create_block(*cell) : block_of(*cell);
    const bool added = p.partial ? merge_partial(block, row) : aggregates_.add_at(block, row, eval_);
    if (!added) {
      if (inserted) {
        destroy_block(*cell);
        d.windows->erase(map_key, h);
      }
      return false;
    }
    if (!p.event) {
      if (inserted) schedule(d, false, p.group, end, end);
      return true;
    }
    // A window that fired already (its end is at or below the watermark, end +
    // allowed_lateness above it) shows every update at once.
    const bool fired = end <= watermark_;
    if (inserted) schedule(d, true, p.group, fired ? end + window_.allowed_lateness : end, end);
    if (fired) emit_row(key, start, end, block, row_timestamp(end), out);
    return true;
  }

  // Merges the partial aggregate at `row` of the batch in process() into `block`; false with
  // eval_.error set when it cannot (Aggregates::merge_serialized).
  bool merge_partial(std::byte* block, std::size_t row) {
    return aggregates_.merge_serialized(block, (*batch_)[row].fields[1].value.str(), eval_.error);
  }

  // The timer of `group` at `time` for the windows that end at `end` went off.
  void fire(Domain& d, bool event, std::uint32_t group, std::int64_t time, std::int64_t end,
            state::Batch& out) {
    freezer_.thaw(group); // deferred snapshots: the group as the barrier left it is serialised first
    changed_.mark(group); // its timer went, and its windows go or change
    GroupTimer& last = registered(d, group, end);
    if (last == GroupTimer{time, end}) last = GroupTimer{INT64_MIN, INT64_MIN};
    const std::int64_t start = end - window_.size;
    const bool emit = time == end;
    const bool keep = emit && event && window_.allowed_lateness > 0;
    const int di = event ? event_domain : processing_domain;
    // A map key starts with its window's start as a varint, which no other varint begins
    // with: entries of other windows (four in five of a sliding window of size 5 x slide) are
    // told apart by comparing those bytes, not by decoding each (a sixth of Nexmark q5's fire).
    char start_bytes[10];
    const char* start_at = put_zigzag_varint_before(start_bytes + sizeof start_bytes, start);
    const std::string_view start_prefix(start_at,
                                        static_cast<std::size_t>(start_bytes + sizeof start_bytes - start_at));
    d.windows->erase_if_in_group(group, [&](std::string_view map_key, Cell& cell) {
      const std::string_view whole_key = map_key;
      if (!map_key.starts_with(start_prefix)) return false;
      map_key.remove_prefix(start_prefix.size());
      // An erased entry takes its mark along: recorded whether marked or not. (The map's
      // other entries move on erase, not this one: it is only read.)
      if (!keep && entries_.recording(group))
        track(di, whole_key, window_hash(group, state::hash_key_bytes(map_key), start), group);
      if (emit) {
        emit_row(map_key, start, end, block_of(cell),
                 event ? row_timestamp(end) : state::kNoTimestamp, out);
        pass_on_if_full(out); // touches nothing of this operator's
      }
      if (keep) return false;
      destroy_block(cell);
      return true;
    });
    if (keep) schedule(d, true, group, end + window_.allowed_lateness, end);
  }

  // Emits and drops every event-time window of `group` whose end is at or below the watermark
  // (no allowed lateness): what fire() does for each of their ends, in one scan of the group.
  void fire_due(Domain& d, std::uint32_t group, state::Batch& out) {
    freezer_.thaw(group); // deferred snapshots: the group as the barrier left it is serialised first
    changed_.mark(group); // its timers went, and its windows go
    d.windows->erase_if_in_group(group, [&](std::string_view map_key, Cell& cell) {
      const std::string_view whole_key = map_key;
      std::int64_t start;
      if (!read_zigzag_varint(map_key, start)) return false; // cannot be: we made it
      const std::int64_t end = start + window_.size;
      if (end > watermark_) return false;
      if (entries_.recording(group))
        track(event_domain, whole_key, window_hash(group, state::hash_key_bytes(map_key), start), group);
      emit_row(map_key, start, end, block_of(cell), row_timestamp(end), out);
      pass_on_if_full(out); // touches nothing of this operator's
      destroy_block(cell);
      return true;
    });
  }

  // --- deltas (the keyed_delta segment above) ---

  bool delta_pays(std::uint32_t key_group, std::size_t changed) const {
    const std::size_t entries =
        domains_[0].windows->group_size(key_group) + domains_[1].windows->group_size(key_group);
    return state::ChangedEntries::delta_pays(changed, entries);
  }
  void write_delta_header(state::StateWriter& w) const {
    w.header('a');
    w.zigzag(window_.size);
    w.zigzag(window_.slide);
  }
  // One time domain's windows of a delta: map key and window, or map key alone when erased.
  struct DeltaEntries {
    std::vector<std::pair<std::string_view, const Cell*>> written;
    std::vector<std::string_view> erased;
    void clear() {
      written.clear();
      erased.clear();
    }
  };
  void write_delta_domain(state::StateWriter& w, const DeltaEntries& entries, std::string& out) const {
    w.varint(entries.written.size());
    for (const auto& [map_key, cell] : entries.written) {
      std::string_view key = map_key;
      std::int64_t start = 0;
      read_zigzag_varint(key, start);
      w.zigzag(start);
      w.bytes(key);
      aggregates_.serialize(block_of(const_cast<Cell&>(*cell)), out);
    }
    w.varint(entries.erased.size());
    for (std::string_view map_key : entries.erased) {
      std::string_view key = map_key;
      std::int64_t start = 0;
      read_zigzag_varint(key, start);
      w.zigzag(start);
      w.bytes(key);
    }
  }

  // The changed windows of one group as take_changed_entries found them (blocks inline and
  // plain bytes only): what its delta is serialised from later. Memory only, host byte order.
  struct DeltaCapture {
    std::string keys;        // per window copied, then per window erased: u32 size, the tracked key
    std::vector<Cell> cells; // per window copied, in order
    std::size_t written = 0;
    std::size_t erased = 0;
    void add_written(std::string_view tracked, const Cell& cell) {
      append_key(tracked);
      cells.push_back(cell);
      ++written;
    }
    void add_erased(std::string_view tracked) {
      append_key(tracked);
      ++erased;
    }
    void append_key(std::string_view tracked) {
      const auto size = static_cast<std::uint32_t>(tracked.size());
      keys.append(reinterpret_cast<const char*>(&size), sizeof size);
      keys.append(tracked);
    }
    std::size_t size() const { return written + erased; }
    std::size_t memory_bytes() const { return keys.capacity() + cells.capacity() * sizeof(Cell); }
  };
  // On the snapshot writer's thread: the delta of a group from its capture (reads only the
  // configuration, and the capture) — the bytes snapshot_key_group_delta wrote at the barrier.
  void write_captured_delta(const DeltaCapture& c, std::string_view timers, std::string& out) const {
    state::StateWriter w(out);
    write_delta_header(w);
    DeltaEntries entries;
    for (int di = 0; di < 2; ++di) {
      entries.clear();
      std::string_view rest = c.keys;
      for (std::size_t i = 0; i < c.written + c.erased; ++i) {
        std::uint32_t size = 0;
        std::memcpy(&size, rest.data(), sizeof size);
        const std::string_view tracked = rest.substr(sizeof size, size);
        rest.remove_prefix(sizeof size + size);
        if (tracked.empty() || static_cast<unsigned char>(tracked[0]) != di) continue;
        if (i < c.written) entries.written.emplace_back(tracked.substr(1), &c.cells[i]);
        else entries.erased.push_back(tracked.substr(1));
      }
      write_delta_domain(w, entries, out);
    }
    out.append(timers);
  }

  // Deferred snapshots: the take of changed entries left unresolved (state/pending_take.hpp),
  // one pending epoch per time domain.
  using PendingTake = state::PendingTake<2>;

  void take_pending(std::vector<state::GroupEntries>& out) {
    std::vector<state::GroupLog> logs;
    entries_.take_logs(logs, [&](std::uint32_t group) {
      for (Domain& d : domains_) d.windows->unmark_group(group);
    });
    pending_take_ = PendingTake::make(
        std::move(logs), out,
        [&](std::uint32_t g) {
          return PendingTake::Epochs{domains_[0].windows->begin_pending(g), domains_[1].windows->begin_pending(g)};
        },
        [&](std::uint32_t g, const PendingTake::Epochs& epochs) {
          abandon_pending(g, epochs);
          for (Domain& d : domains_) d.windows->unmark_group(g); // no free epoch: scanned
        });
  }
  void abandon_pending(std::uint32_t g, const PendingTake::Epochs& epochs) {
    for (int di = 0; di < 2; ++di)
      if (epochs[di] != 0) domains_[di].windows->abandon_pending(g, epochs[di]);
  }

  // The groups of the pending take that the plan writes as deltas (`deltas`; every unresolved
  // one it writes as a delta is there) are frozen, to be resolved later; the others' pending
  // stamps are given up (the plan writes those groups whole).
  std::shared_ptr<state::FrozenKeyGroups> freeze_pending_take(const state::DeltaKeys& deltas) {
    std::shared_ptr<PendingTake> take = pending_take_;
    std::vector<std::uint32_t> groups =
        take->freeze(deltas, [this](std::uint32_t g, const PendingTake::Epochs& e) { abandon_pending(g, e); });
    if (groups.empty()) return nullptr;
    auto timers = std::make_shared<std::unordered_map<std::uint32_t, std::string>>();
    for (std::uint32_t g : groups) state::StateWriter((*timers)[g]).timers(*timers_, g); // shared: read now
    frozen_deltas_now_ = true;
    auto serialise = [this, take, timers](std::uint32_t g, std::string& out) {
      write_captured_delta(resolve_pending(*take, g), timers->at(g), out);
    };
    auto copy = [this, take, timers](std::uint32_t g) {
      DeltaCapture c = resolve_pending(*take, g);
      const std::size_t bytes = c.memory_bytes() + timers->at(g).size();
      return state::FrozenKeyGroups::GroupCopy{[this, captured = std::move(c), timers, g](std::string& out) {
                                                 write_captured_delta(captured, timers->at(g), out);
                                               },
                                               bytes};
    };
    return freezer_.freeze(range_, std::move(groups), std::move(serialise), std::move(copy));
  }

  // On the thread that claimed frozen group `g` (the writer, or the task in thaw): the changed
  // windows of its log as the barrier left them, their pending stamps cleared.
  DeltaCapture resolve_pending(PendingTake& take, std::uint32_t g) {
    DeltaCapture c;
    std::vector<std::string> keys;
    take.resolve(
        g, keys,
        [&](std::string_view tracked, std::uint64_t hash, const PendingTake::Epochs& epochs) -> std::optional<bool> {
          const int di = static_cast<unsigned char>(tracked[0]);
          bool was_pending = false;
          const Cell* cell = domains_[di].windows->resolve_pending(tracked.substr(1), hash, epochs[di], was_pending);
          if (cell == nullptr) return std::nullopt;
          if (was_pending) c.add_written(tracked, *cell);
          return was_pending;
        },
        [&](std::string_view tracked, std::uint64_t hash) {
          domains_[static_cast<unsigned char>(tracked[0])].windows->prefetch(hash);
        });
    // Windows present first, in the order copied, then those erased (ChangedEntries::resolve).
    for (std::size_t k = c.written; k < keys.size(); ++k) c.add_erased(keys[k]);
    return c;
  }


  const bool inline_blocks_;
  const std::size_t registered_ways_ = ways_for(window_);
  // Records ahead to prefetch: prefetch_windows over the windows a record belongs to.
  const std::size_t prefetch_distance_ = static_cast<std::size_t>(std::max<std::int64_t>(
      1, prefetch_windows / ((window_.size + window_.slide - 1) / window_.slide)));
  std::uint32_t max_parallelism_ = 1;
  state::KeyGroupOf group_of_{1};
  std::uint64_t spread_ = 0; // window_hash: how many multiples of max_parallelism it spreads over
  state::KeyGroupRange range_;
  Domain domains_[2];
  std::optional<state::TimerService> timers_;
  state::ChangedGroups changed_; // since the last incremental checkpoint
  state::ChangedEntries entries_; // the same, entry by entry
  std::string entry_key_;          // scratch: a tracked entry's key
  std::vector<Pending> pending_; // scratch, per batch
  const state::Batch* batch_ = nullptr; // the batch in process(), for merge_partial
  // last_aligned_start(): the slide [slide_begin_, slide_begin_ + slide) of the time before,
  // when slide_cached_.
  std::int64_t slide_begin_ = 0;
  bool slide_cached_ = false;
  // scratch: per record to add, max_start_bytes of room for a window start, then its key bytes
  state::ByteScratch keys_;
  // The changed windows the last take_changed_entries copied, for defer_key_group_deltas.
  state::DeltaCaptures<DeltaCapture> captures_;
  // The last deferred take, until the next take settles it (see take_changed_entries).
  std::shared_ptr<PendingTake> pending_take_;
  bool frozen_deltas_now_ = false; // freeze_pending_take froze deltas at this barrier
  // Where deferred snapshots' copies of groups are made (shared with copies the writer holds).
  std::shared_ptr<state::RecycledMemory> copy_memory_ =
      std::make_shared<state::RecycledMemory>(state::FrozenKeyGroups::default_copy_budget);
  bool prepare_copies_ = false;  // groups were restored since (prepare_copy_memory)
  std::jthread copy_preparer_;   // prepare_copy_memory's, joined when it goes
  // Deferred snapshots: the groups frozen at the last barrier (see freeze_key_groups). Last, so
  // that it is destroyed first (it abandons what is still frozen).
  state::KeyGroupFreezer freezer_;
};

[[noreturn]] void usage_error(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node,
                              std::string_view key, const std::string& message) {
  throw Error(ErrorKind::Usage, pipeline::position_of(spec, node, key) + ": operator '" +
                                    node.name + "': " + message);
}

} // namespace

namespace {

// Projection: a window's rows are made of its key and aggregates; its late output passes the
// records it got.
std::vector<pipeline::FieldSet> window_reads(const pipeline::PipelineSpec&, const pipeline::NodeSpec& node,
                                             const pipeline::FieldSet&, const pipeline::FieldSet& late) {
  pipeline::FieldSet reads = late;
  add_key_fields(reads, node);
  add_aggregate_fields(reads, node);
  return {reads};
}

} // namespace

pipeline::NodeTypeSchema window_schema() {
  using pipeline::KeySchema;
  using pipeline::KeyType;
  pipeline::NodeTypeSchema schema{
      "window",
      {
          KeySchema{"key", KeyType::StringArray, true, {}, {}, "fields that form the key"},
          KeySchema{
              "window",
              KeyType::Table,
              true,
              {},
              {
                  KeySchema{"kind",
                            KeyType::Enum,
                            true,
                            {"tumbling", "sliding", "session"},
                            {},
                            "the kind of windows"},
                  KeySchema{
                      "size", KeyType::Duration, false, {}, {}, "tumbling, sliding: window length"},
                  KeySchema{"slide",
                            KeyType::Duration,
                            false,
                            {},
                            {},
                            "sliding: step between window starts"},
                  KeySchema{"gap",
                            KeyType::Duration,
                            false,
                            {},
                            {},
                            "session: the most time between records"},
              },
              "kind = \"tumbling\"|\"sliding\"|\"session\", size, slide, gap"},
          KeySchema{"aggregates", KeyType::StringMap, true, {}, {}, "name = \"function(field)\""},
          KeySchema{"allowed_lateness",
                    KeyType::Duration,
                    false,
                    {},
                    {},
                    "how long after its end a window still takes records"},
          KeySchema{"late_output",
                    KeyType::String,
                    false,
                    {},
                    {},
                    "a name other nodes read late records from"},
      }};
  schema.read_fields = window_reads;
  schema.combinable = window_combinable;
  return schema;
}

Aggregates window_aggregates(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node,
                             state::FieldNames& names) {
  std::vector<std::pair<std::string, std::string>> entries;
  const auto ordered = in_file_order(node.config["aggregates"].as_table());
  entries.reserve(ordered.size());
  for (const auto& [name, value] : ordered)
    entries.emplace_back(name, value->value_or(std::string()));
  try {
    return Aggregates::compile(entries, names);
  } catch (const AggregateError& e) {
    // Point at the entry's own string when the file has it.
    std::string where = pipeline::position_of(spec, node, "aggregates");
    if (e.entry() < ordered.size()) {
      const auto& begin = ordered[e.entry()].second->source().begin;
      if (begin.line > 0)
        where = spec.file.string() + ":" + std::to_string(begin.line) + ":" +
                std::to_string(begin.column);
    }
    throw Error(ErrorKind::Usage, where + ": operator '" + node.name + "': " + e.what());
  } catch (const pipeline::ExpressionError& e) {
    usage_error(spec, node, "aggregates", e.what());
  } catch (const Error& e) { // an empty output name
    usage_error(spec, node, "aggregates", e.what());
  }
}

std::unique_ptr<Operator> make_window(const pipeline::PipelineSpec& spec,
                                      const pipeline::NodeSpec& node, state::FieldNames& names) {
  WindowSpec window = WindowSpec::from_node(spec, node);
  std::optional<Aggregates> aggregates(window_aggregates(spec, node, names));

  KeyFields key = KeyFields::from_node(spec, node, names);
  std::vector<state::FieldId> key_names = key.output_names();
  WindowSettings settings{std::move(key),
                          std::move(key_names),
                          std::move(*aggregates),
                          window,
                          names.intern("window_start"),
                          names.intern("window_end"),
                          window_combinable(spec, node),
                          names.intern(kPartialKeyField),
                          names.intern(kPartialStateField)};
  // Output rows are key fields, window_start, window_end, aggregates: one name each.
  for (state::FieldId id : settings.key_names)
    if (id == settings.window_start || id == settings.window_end)
      usage_error(spec, node, "key", "a key field cannot be named 'window_start' or 'window_end'");
  for (std::size_t k = 0; k < settings.aggregates.size(); ++k) {
    state::FieldId id = settings.aggregates.output_fields()[k];
    bool clash = id == settings.window_start || id == settings.window_end ||
                 std::find(settings.key_names.begin(), settings.key_names.end(), id) !=
                     settings.key_names.end();
    if (clash)
      usage_error(
          spec, node, "aggregates",
          "aggregate '" + std::string(names.name(id)) +
              "' has the name of a field every row has already (a key field, window_start or "
              "window_end)");
  }
  if (window.kind == WindowKind::Session) return make_session_windows(std::move(settings));
  // The smallest cell that holds the block inline; a block that fits none lives on the heap,
  // its pointer in a Cell<8>.
  const std::size_t bytes = settings.aggregates.state_bytes();
  const std::size_t align = settings.aggregates.block_align();
  if (align <= 8 && bytes <= 8) return std::make_unique<AlignedWindows<Cell<8>>>(std::move(settings));
  if (align <= 8 && bytes <= 16) return std::make_unique<AlignedWindows<Cell<16>>>(std::move(settings));
  if (align <= 8 && bytes <= 24) return std::make_unique<AlignedWindows<Cell<24>>>(std::move(settings));
  if (align <= 16 && bytes <= 32) return std::make_unique<AlignedWindows<Cell<32>>>(std::move(settings));
  return std::make_unique<AlignedWindows<Cell<8>>>(std::move(settings));
}

} // namespace streamctl::operators
