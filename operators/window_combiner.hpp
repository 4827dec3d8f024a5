#pragma once
// Two-phase aggregation (Flink's local-global aggregation): the sender of a key edge into an
// event-time tumbling or sliding window adds its records into partial aggregates, one per
// (key, pane), and sends those instead of the records. The window merges each partial into
// every window that holds its pane (window.cpp). In a dense keyed count, where each key has
// about ten records per window, the exchange then carries a tenth of the records.
//
// A pane is a slide of time (a tumbling window is one pane): every time in a pane belongs to
// the same windows, so a partial of a pane merges exactly where its records would have been
// added. The window's results are the same as without combining, because:
//   - a pane is sent before the sender forwards a watermark at or past the pane's end, the end
//     of the earliest window that holds it; the window's watermark is the least of its senders',
//     so no window a partial belongs to has fired when it arrives;
//   - a record that cannot be combined goes on as it came (pass-through): one without event
//     time, one whose pane has ended at the watermark this sender forwarded (the window decides
//     whether it is late, as always), one whose key or aggregate argument fails (the window
//     reports it as a bad record, with its own text), one out of the supported range of times;
//   - nothing is held across a checkpoint barrier, an idle mark or the end of input: the sender
//     sends every partial first, so that no partial is checkpointed and exactly-once holds;
//   - only functions whose merge equals adding the records in any order combine (count, sum,
//     avg, min, max, count_distinct, approx_count_distinct, top_k; not first and last, which
//     depend on arrival order), and a window without allowed lateness (whose late updates
//     re-emit rows record by record).
// A sum of floats may round differently, as it may between any two runs at parallelism > 1.
//
// A partial travels as a record of two string fields, in this order:
//   kPartialKeyField    the key's canonical bytes (state/key_codec.hpp)
//   kPartialStateField  the aggregates block in its binary form (Aggregates::serialize)
// with the pane's start (epoch ms) as its event time. The names start with the unit separator
// (0x1F), which no field of a user's records has unless written as "\u001f" in JSON.
//
// The top-level `combine = false` turns it off (pipeline/spec/combining.hpp); `graph` shows the
// edges it combines.
//
// Not thread-safe: one per router (task thread).

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "operators/aggregates.hpp"
#include "operators/key_fields.hpp"
#include "operators/window_assigner.hpp"
#include "pipeline/spec/pipeline_spec.hpp"
#include "state/batch.hpp"
#include "state/byte_scratch.hpp"
#include "state/field_names.hpp"
#include "state/keyed_map.hpp"
#include "state/recycled_memory.hpp"

namespace streamctl::operators {

inline constexpr std::string_view kPartialKeyField = "\x1f" "combined.key";
inline constexpr std::string_view kPartialStateField = "\x1f" "combined.state";

// Whether records into `node` (a window) may be combined before a key edge: the schema's
// `combinable` hook of the window type.
bool window_combinable(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node);

class WindowCombiner {
public:
  // The combiner of records sent to `node`; nullptr when it cannot combine them
  // (window_combinable). Throws as make_window does for a bad node (validation accepted it).
  static std::unique_ptr<WindowCombiner> for_node(const pipeline::PipelineSpec& spec,
                                                  const pipeline::NodeSpec& node,
                                                  state::FieldNames& names);
  ~WindowCombiner();
  WindowCombiner(const WindowCombiner&) = delete;
  WindowCombiner& operator=(const WindowCombiner&) = delete;

  // Adds the records of `in` it can combine, and appends to `passed` the indices of those it
  // passes through, in order.
  void add(const state::Batch& in, std::vector<std::uint32_t>& passed);
  // Moves to `out` a partial record for each (key, pane) of every pane that ends at or before
  // `watermark`, appending to `hashes` the hash_key_bytes of each one's key, and forgets them.
  // From then on a record of such a pane passes through. It stops at the end of the key group
  // where `out` holds at least `max_records` (panes are taken a key group at a time) and returns
  // whether some are left: the caller sends these and calls again, so that its batch of
  // partials stays small enough for the caches (100,000 keys made one of about 8 MB, on pages
  // fresh from the kernel). Nothing may be added between such calls.
  bool take(std::int64_t watermark, state::Batch& out, std::vector<std::uint64_t>& hashes,
            std::size_t max_records = SIZE_MAX);
  // Every pane, the watermark unchanged (a barrier, an idle mark, a full table).
  bool take_all(state::Batch& out, std::vector<std::uint64_t>& hashes,
                std::size_t max_records = SIZE_MAX);
  // Whether records should go past the combiner as they are for now, because combining has not
  // been paying: where most keys have a single record per pane (a sparse count), a partial per
  // record only adds a table and its serialising to the exchange (about 10% more CPU). Like
  // Trino's adaptive partial aggregation: combining is measured over probe_records records, and
  // when the partials made and the records passed through number more than half of them, the next
  // bypass_records records pass by before it is tried again. The sender calls bypassed() with
  // the records it sent past, and add() otherwise.
  bool bypassing() const { return bypass_left_ > 0; }
  void bypassed(std::size_t records) { bypass_left_ -= std::min<std::uint64_t>(records, bypass_left_); }
  static constexpr std::uint64_t probe_records = 262144;
  static constexpr std::uint64_t bypass_records = 16 * probe_records;

  // Holds so many entries that the sender should take_all(): a bound on its memory.
  bool full() const { return entries_ >= max_entries; }
  std::size_t entries() const { return entries_; }
  static constexpr std::size_t max_entries = std::size_t{1} << 18;

private:
  struct Pane;
  struct Unit;
  struct NarrowUnit;
  // What the first pass over a batch found of one record: its pane (null: it passes through),
  // its key (in key_bytes_) and the key's hash.
  struct Pending {
    Pane* pane;
    std::uint64_t hash;
    std::uint32_t key_begin;
    std::uint32_t key_size;
  };
  static constexpr std::size_t prefetch_distance = 8;
  WindowCombiner(KeyFields key, Aggregates aggregates, WindowSpec window, std::uint32_t max_parallelism,
                 state::FieldNames& names);

  Pane& pane_at(std::int64_t start);
  template <typename U> std::byte* block(Pane& pane, U& slot) const;
  // Adds record `row` of the batch in add() to its pane, whose index is `index`; false when its
  // aggregate arguments fail.
  template <typename U>
  bool add_to_pane(Pane& pane, state::KeyedMap<U>& index, const Pending& p, std::size_t row);
  template <typename U> void prefetch(Pane& pane, std::uint64_t hash) const;
  template <typename U>
  void take_group(Pane& pane, state::KeyedMap<U>& index, state::Batch& out,
                  std::vector<std::uint64_t>& hashes);
  template <typename U> void destroy_untaken(Pane& pane, state::KeyedMap<U>& index);
  // window_.last_aligned_start(t), remembering the pane of the time before.
  bool pane_start(std::int64_t t, std::int64_t& start);
  // Whether `t` falls in the pane pane_start() found last (every time of which is in range).
  bool in_cached_pane(std::int64_t t) const {
    return pane_cached_ && static_cast<std::uint64_t>(t) - static_cast<std::uint64_t>(cached_start_) <
                               static_cast<std::uint64_t>(window_.slide);
  }
  // Takes the pane's key groups from the first not taken yet until `out` holds `max_records`;
  // whether it took them all.
  bool take_pane(Pane& pane, state::Batch& out, std::vector<std::uint64_t>& hashes,
                 std::size_t max_records);
  // take() and take_all() without their watermark: every pane ending at or before `limit`
  // (every pane: INT64_MAX).
  bool take_panes_ending_by(std::int64_t limit, state::Batch& out, std::vector<std::uint64_t>& hashes,
                            std::size_t max_records);

  KeyFields key_;
  Aggregates aggregates_;
  WindowSpec window_;
  std::uint32_t max_parallelism_;
  state::FieldNames& names_;
  state::FieldId key_field_;
  state::FieldId state_field_;
  std::size_t block_units_; // 16-byte units of one block
  // The map's slot holds an 8-byte NarrowUnit: a block of at most 8 bytes (a count), or the
  // number of a block in Pane::blocks (one over 16 bytes). Else a 16-byte Unit with the block.
  bool narrow_slots_;
  bool inline_blocks_; // a block fits in the map's slot
  std::vector<Pending> pending_; // scratch, per batch

  // The tables of panes taken, kept for the next ones: a pane lives about a slide, and fresh
  // pages for each cost the kernel's zeroing.
  state::RecycledMemory table_memory_{std::size_t{64} << 20};
  std::vector<std::unique_ptr<Pane>> panes_; // in no order; few at once (the watermark's lag)
  Pane* last_pane_ = nullptr;
  std::int64_t cached_start_ = 0;
  bool pane_cached_ = false;
  std::size_t entries_ = 0;
  std::int64_t watermark_ = INT64_MIN; // the last one given to take()
  pipeline::EvalContext eval_;
  state::Arena eval_arena_{4096};
  state::ByteScratch key_bytes_;
  std::string serialized_;
  std::uint64_t probe_in_ = 0;      // records given to add() since the probe began
  std::uint64_t probe_entries_ = 0; // entries made and records passed through meanwhile
  std::uint64_t bypass_left_ = 0;
};

} // namespace streamctl::operators
