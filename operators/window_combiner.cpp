#include "operators/window_combiner.hpp"

#include <algorithm>
#include <cstring>
#include <variant>

#include "operators/wall_clock.hpp"
#include "operators/window.hpp"
#include "state/key_group.hpp"

namespace streamctl::operators {

namespace {

bool order_insensitive(AggregateKind kind) {
  return kind != AggregateKind::First && kind != AggregateKind::Last;
}

} // namespace

// A block's storage unit: blocks are at most 16-aligned (Aggregates::block_align) and trivially
// relocatable, so a vector of units, or the map, may move them as bytes.
struct alignas(16) WindowCombiner::Unit {
  std::byte bytes[16];
};

// A narrow slot: a map of them has 32-byte slots where Unit's has 48 (KeyedMap's slot is hash,
// key and value, aligned as the value), so a count's table is two thirds the size: fewer cache
// misses per record and fewer fresh pages.
struct alignas(8) WindowCombiner::NarrowUnit {
  std::byte bytes[8];
};

// One pane's partials: key bytes → the block, held in the map's slot when it fits (a count's in
// a NarrowUnit, a sum's in a Unit: one cache miss per record, not two), else the number of its
// block in `blocks` (in the slot's first four bytes).
struct WindowCombiner::Pane {
  using Wide = state::KeyedMap<Unit>;
  using Narrow = state::KeyedMap<NarrowUnit>;
  Pane(std::int64_t s, bool narrow, std::uint32_t max_parallelism, state::SlotMemory* memory)
      : start(s),
        index(narrow ? std::variant<Wide, Narrow>(std::in_place_type<Narrow>,
                                                  state::KeyGroupRange{0, max_parallelism},
                                                  max_parallelism, memory)
                     : std::variant<Wide, Narrow>(std::in_place_type<Wide>,
                                                  state::KeyGroupRange{0, max_parallelism},
                                                  max_parallelism, memory)) {}
  std::int64_t start;
  std::variant<Wide, Narrow> index;
  std::vector<Unit> blocks;
  std::uint32_t count = 0;      // entries; blocks in use when they are not inline
  std::uint32_t next_group = 0; // key groups before it are taken (take_pane)
};

bool window_combinable(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node) {
  if (node.type != "window") return false;
  try {
    const WindowSpec window = WindowSpec::from_node(spec, node);
    if (window.kind == WindowKind::Session || window.allowed_lateness != 0 ||
        window.size % window.slide != 0)
      return false;
    state::FieldNames names;
    const Aggregates aggregates = window_aggregates(spec, node, names);
    for (std::size_t k = 0; k < aggregates.size(); ++k)
      if (!order_insensitive(aggregates.function(k).kind())) return false;
    return aggregates.state_bytes() > 0 && aggregates.block_align() <= 16;
  } catch (const std::exception&) {
    return false; // the window itself reports what is wrong with it
  }
}

std::unique_ptr<WindowCombiner> WindowCombiner::for_node(const pipeline::PipelineSpec& spec,
                                                         const pipeline::NodeSpec& node,
                                                         state::FieldNames& names) {
  if (!window_combinable(spec, node)) return nullptr;
  return std::unique_ptr<WindowCombiner>(new WindowCombiner(
      KeyFields::from_node(spec, node, names), window_aggregates(spec, node, names),
      WindowSpec::from_node(spec, node), static_cast<std::uint32_t>(spec.max_parallelism), names));
}

WindowCombiner::WindowCombiner(KeyFields key, Aggregates aggregates, WindowSpec window,
                               std::uint32_t max_parallelism, state::FieldNames& names)
    : key_(std::move(key)), aggregates_(std::move(aggregates)), window_(window),
      max_parallelism_(max_parallelism), names_(names),
      key_field_(names.intern(kPartialKeyField)), state_field_(names.intern(kPartialStateField)),
      block_units_((aggregates_.state_bytes() + sizeof(Unit) - 1) / sizeof(Unit)),
      narrow_slots_(block_units_ > 1 ||
                    (aggregates_.state_bytes() <= sizeof(NarrowUnit) && aggregates_.block_align() <= alignof(NarrowUnit))),
      inline_blocks_(block_units_ == 1) {}

WindowCombiner::~WindowCombiner() {
  for (auto& pane : panes_) std::visit([&](auto& index) { destroy_untaken(*pane, index); }, pane->index);
}

template <typename U> void WindowCombiner::destroy_untaken(Pane& pane, state::KeyedMap<U>& index) {
  for (std::uint32_t group = pane.next_group; group < max_parallelism_; ++group)
    index.for_each_in_group(group, [&](std::string_view, U& slot) { aggregates_.destroy(block(pane, slot)); });
}

template <typename U> std::byte* WindowCombiner::block(Pane& pane, U& slot) const {
  if (inline_blocks_) return slot.bytes;
  std::uint32_t index;
  std::memcpy(&index, slot.bytes, sizeof index);
  return pane.blocks[index * block_units_].bytes;
}

WindowCombiner::Pane& WindowCombiner::pane_at(std::int64_t start) {
  if (last_pane_ != nullptr && last_pane_->start == start) return *last_pane_;
  auto it = std::find_if(panes_.begin(), panes_.end(), [&](const auto& p) { return p->start == start; });
  if (it == panes_.end()) {
    panes_.push_back(std::make_unique<Pane>(start, narrow_slots_, max_parallelism_, &table_memory_));
    it = panes_.end() - 1;
  }
  last_pane_ = it->get();
  return *last_pane_;
}

void WindowCombiner::add(const state::Batch& in, std::vector<std::uint32_t>& passed) {
  eval_arena_.reset();
  eval_.arena = &eval_arena_;
  eval_.now_ms = wall_clock_ms();
  const std::span<const state::Record> records(in.begin(), in.end());
  key_.prepare(records);
  aggregates_.prepare(records, eval_);
  // First pass: each record's pane, key and hash; the second adds, with the map slots of a
  // record a few ahead loading meanwhile (as the window does: the keys are spread over a table
  // larger than the caches).
  pending_.resize(in.size());
  key_bytes_.clear();
  const std::size_t passed_before = passed.size();
  for (std::size_t i = 0; i < in.size(); ++i) {
    const state::Record& record = in[i];
    Pending& p = pending_[i];
    p.pane = nullptr;
    const std::int64_t t = record.timestamp;
    if (t == state::kNoTimestamp) continue;
    // A pane is the slide that holds the time: its start is the latest window start. Most
    // times of a batch are in the pane of the record before (no lookup, no call).
    std::int64_t start;
    Pane* pane = nullptr;
    if (last_pane_ != nullptr && last_pane_->start == cached_start_ && in_cached_pane(t)) {
      pane = last_pane_;
      start = cached_start_;
    } else if (!pane_start(t, start)) {
      continue;
    }
    if (start + window_.slide <= watermark_) continue;
    const std::size_t begin = key_bytes_.size();
    if (!key_.append_at(i, record, names_, key_bytes_)) {
      key_bytes_.truncate(begin);
      continue;
    }
    p.pane = pane != nullptr ? pane : &pane_at(start);
    p.key_begin = static_cast<std::uint32_t>(begin);
    p.key_size = static_cast<std::uint32_t>(key_bytes_.size() - begin);
    p.hash = state::hash_key_bytes(std::string_view(key_bytes_.data() + begin, p.key_size));
  }
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (i + prefetch_distance < in.size()) {
      const Pending& ahead = pending_[i + prefetch_distance];
      if (ahead.pane != nullptr) {
        if (narrow_slots_)
          prefetch<NarrowUnit>(*ahead.pane, ahead.hash);
        else
          prefetch<Unit>(*ahead.pane, ahead.hash);
      }
    }
    const Pending& p = pending_[i];
    const bool added =
        p.pane != nullptr &&
        (narrow_slots_ ? add_to_pane(*p.pane, *std::get_if<Pane::Narrow>(&p.pane->index), p, i)
                       : add_to_pane(*p.pane, *std::get_if<Pane::Wide>(&p.pane->index), p, i));
    if (!added) passed.push_back(static_cast<std::uint32_t>(i));
  }
  // Every record counts in the probe, and one passed through as much as a partial made: it costs
  // the exchange as much (a job whose records carry no event time passes them all, and then the
  // combiner steps aside).
  probe_in_ += in.size();
  probe_entries_ += passed.size() - passed_before;
  if (probe_in_ >= probe_records) {
    if (2 * probe_entries_ > probe_in_) bypass_left_ = bypass_records;
    probe_in_ = probe_entries_ = 0;
  }
}

bool WindowCombiner::pane_start(std::int64_t t, std::int64_t& start) {
  // Most times of a batch fall in the pane of the time before: no 64-bit division for those.
  if (in_cached_pane(t)) {
    start = cached_start_;
    return true;
  }
  if (!window_.last_aligned_start(t, start)) return false;
  std::int64_t ignored; // kept when every time of the pane is in range
  pane_cached_ = window_.last_aligned_start(start + window_.slide - 1, ignored);
  cached_start_ = start;
  return true;
}

template <typename U> void WindowCombiner::prefetch(Pane& pane, std::uint64_t hash) const {
  std::get_if<state::KeyedMap<U>>(&pane.index)->prefetch(hash);
}

template <typename U>
bool WindowCombiner::add_to_pane(Pane& pane, state::KeyedMap<U>& index, const Pending& p,
                                 std::size_t row) {
  const std::string_view key(key_bytes_.data() + p.key_begin, p.key_size);
  auto [slot, inserted] = index.try_emplace(key, p.hash);
  if (inserted) {
    if (!inline_blocks_) {
      std::memcpy(slot->bytes, &pane.count, sizeof pane.count);
      pane.blocks.resize(std::size_t{pane.count + 1} * block_units_);
    }
    aggregates_.init(block(pane, *slot));
  }
  std::byte* b = block(pane, *slot);
  if (!aggregates_.add_at(b, row, eval_)) {
    if (inserted) {
      aggregates_.destroy(b);
      index.erase(key, p.hash);
    }
    return false;
  }
  if (inserted) {
    ++pane.count;
    ++entries_;
    ++probe_entries_;
  }
  return true;
}

bool WindowCombiner::take_pane(Pane& pane, state::Batch& out, std::vector<std::uint64_t>& hashes,
                               std::size_t max_records) {
  for (; pane.next_group < max_parallelism_; ++pane.next_group) {
    if (out.size() >= max_records) return false;
    std::visit([&](auto& index) { take_group(pane, index, out, hashes); }, pane.index);
  }
  return true;
}

template <typename U>
void WindowCombiner::take_group(Pane& pane, state::KeyedMap<U>& index, state::Batch& out,
                                std::vector<std::uint64_t>& hashes) {
  index.for_each_hashed_in_group(pane.next_group, [&](std::string_view key, std::uint64_t hash, U& slot) {
    std::byte* b = block(pane, slot);
    serialized_.clear();
    aggregates_.serialize(b, serialized_);
    aggregates_.destroy(b);
    const state::Field fields[2] = {
        {key_field_, state::Value::string(out.copy_string(key))},
        {state_field_, state::Value::string(out.copy_string(serialized_))},
    };
    out.add(fields, pane.start);
    hashes.push_back(hash); // the key's, stored by the map (hash_key_bytes)
    --pane.count;
    --entries_;
  });
}

bool WindowCombiner::take(std::int64_t watermark, state::Batch& out, std::vector<std::uint64_t>& hashes,
                          std::size_t max_records) {
  watermark_ = std::max(watermark_, watermark);
  return take_panes_ending_by(watermark, out, hashes, max_records);
}

bool WindowCombiner::take_all(state::Batch& out, std::vector<std::uint64_t>& hashes,
                              std::size_t max_records) {
  return take_panes_ending_by(INT64_MAX, out, hashes, max_records);
}

bool WindowCombiner::take_panes_ending_by(std::int64_t limit, state::Batch& out,
                                          std::vector<std::uint64_t>& hashes, std::size_t max_records) {
  last_pane_ = nullptr;
  // Panes in order of time, so that a window sees its panes' partials oldest first.
  std::sort(panes_.begin(), panes_.end(), [](const auto& a, const auto& b) { return a->start < b->start; });
  while (!panes_.empty() && (limit == INT64_MAX || panes_.front()->start + window_.slide <= limit)) {
    if (!take_pane(*panes_.front(), out, hashes, max_records)) return true;
    panes_.erase(panes_.begin());
  }
  return false;
}

} // namespace streamctl::operators
