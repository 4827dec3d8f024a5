#include "pipeline/runtime/incremental_snapshots.hpp"

#include <algorithm>
#include <numeric>
#include <set>

namespace streamctl::runtime {

namespace {
// Snapshots since the base without one completing (failing checkpoints, savepoints): past
// this, the next is full, so that what the task remembers of them stays small.
constexpr std::size_t kMaxUncompleted = 64;
} // namespace

IncrementalSettings incremental_settings_of(const pipeline::PipelineSpec& spec) {
  IncrementalSettings s;
  auto table = spec.root["checkpoint"];
  s.enabled = table["incremental"].value_or(true);
  s.full_every = static_cast<int>(std::clamp<std::int64_t>(table["full_every"].value_or(std::int64_t{10}), 1, 1000));
  s.rolling = table["rolling"].value_or(true);
  return s;
}

std::string encode_previous_files(const std::vector<CheckpointTaskFile::PreviousFile>& files) {
  std::string out;
  for (const auto& f : files) out += std::to_string(f.bytes) + " " + f.path + "\n";
  return out;
}

std::optional<std::vector<CheckpointTaskFile::PreviousFile>> decode_previous_files(std::string_view text) {
  std::vector<CheckpointTaskFile::PreviousFile> out;
  while (!text.empty()) {
    auto end = text.find('\n');
    if (end == std::string_view::npos) return std::nullopt;
    std::string_view line = text.substr(0, end);
    text.remove_prefix(end + 1);
    auto space = line.find(' ');
    if (space == 0 || space == std::string_view::npos || space > 19) return std::nullopt;
    std::uint64_t bytes = 0;
    for (char c : line.substr(0, space)) {
      if (c < '0' || c > '9') return std::nullopt;
      bytes = bytes * 10 + static_cast<std::uint64_t>(c - '0');
    }
    std::string_view path = line.substr(space + 1);
    if (!previous_checkpoint_of(path)) return std::nullopt;
    out.push_back({std::string(path), bytes});
  }
  return out;
}

IncrementalSnapshots::IncrementalSnapshots(IncrementalSettings settings, std::string own_file,
                                           state::KeyGroupRange key_groups)
    : settings_(settings), own_file_(std::move(own_file)), key_groups_(key_groups) {}

std::size_t IncrementalSnapshots::slices() const {
  // One slice is a full snapshot each time: full_every = 1 means just that.
  if (!settings_.rolling || settings_.full_every < 2) return 0;
  return std::min<std::size_t>(static_cast<std::size_t>(settings_.full_every), key_groups_.size());
}

std::vector<std::uint32_t> IncrementalSnapshots::slice_groups(std::size_t slice) const {
  std::vector<std::uint32_t> out;
  const std::size_t n = slices();
  for (std::uint32_t g = key_groups_.first + static_cast<std::uint32_t>(slice); g < key_groups_.end;
       g += static_cast<std::uint32_t>(n))
    out.push_back(g);
  return out;
}

bool IncrementalSnapshots::start_full() const {
  if (!base_ || taken_.size() >= kMaxUncompleted) return true;
  const auto max_files = static_cast<std::size_t>(std::max(settings_.full_every, 1));
  // Rolling: the chain stays short by itself (the plan drops a file as it adds one, at most
  // full_every with the new one), and its first file is no full one to weigh the deltas against.
  if (slices() > 0) return base_->whole_at.size() != slices() || base_->files.size() > max_files;
  if (base_->files.size() >= max_files) return true;
  std::uint64_t deltas = 0;
  for (std::size_t k = 1; k < base_->files.size(); ++k) deltas += base_->files[k].bytes;
  return deltas > base_->files.front().bytes;
}

IncrementalSnapshots::Plan IncrementalSnapshots::plan(std::uint64_t id, const std::filesystem::path& dir,
                                                      bool savepoint,
                                                      const std::vector<operators::Operator*>& operators,
                                                      bool deferred) {
  Taken now;
  for (operators::Operator* op : operators) {
    std::vector<std::uint32_t> groups;
    const bool tracked = op->take_changed_key_groups(groups);
    if (tracked) now.changed.emplace_back(std::move(groups));
    else now.changed.emplace_back(std::nullopt);
    // Entries only when deltas may be written: their tracking costs a lookup per update.
    std::vector<state::GroupEntries> entries;
    std::set<std::uint32_t> unresolved;
    if (tracked && settings_.enabled && op->take_changed_entries(entries, deferred)) {
      std::map<std::uint32_t, std::vector<std::string>> by_group;
      for (auto& e : entries) {
        if (e.unresolved) unresolved.insert(e.key_group);
        by_group[e.key_group] = std::move(e.keys);
      }
      now.entries.emplace_back(std::move(by_group));
    } else {
      now.entries.emplace_back(std::nullopt);
    }
    now.unresolved.push_back(std::move(unresolved));
  }
  now.may_be_base = settings_.enabled && !savepoint && dir.filename() == "chk-" + std::to_string(id);
  // A restored chain's paths are relative to its own directory: only a sibling may name them.
  if (restored_root_ && now.may_be_base) {
    if (dir.parent_path().lexically_normal() != restored_root_->lexically_normal()) base_.reset();
    restored_root_.reset();
  }

  Plan plan;
  plan.groups.resize(operators.size());
  plan.deltas.resize(operators.size());
  plan.deltas_of_this_take.resize(operators.size());
  if (now.may_be_base && !start_full()) {
    plan.previous = base_->files;
    // Rolling wholes: the slice whose newest whole copy is oldest is written whole, and the
    // files older than every slice's newest whole copy leave the chain.
    std::vector<std::uint32_t> rolled;
    if (slices() > 0) {
      now.whole_at = base_->whole_at;
      auto oldest = std::min_element(now.whole_at.begin(), now.whole_at.end());
      rolled = slice_groups(static_cast<std::size_t>(oldest - now.whole_at.begin()));
      *oldest = id;
      const std::uint64_t needed_from = *std::min_element(now.whole_at.begin(), now.whole_at.end());
      std::erase_if(plan.previous, [&](const CheckpointTaskFile::PreviousFile& f) {
        return previous_checkpoint_of(f.path).value_or(0) < needed_from;
      });
    }
    for (std::size_t k = 0; k < operators.size(); ++k) {
      bool tracked = now.changed[k].has_value();
      std::set<std::uint32_t> groups(rolled.begin(), rolled.end());
      if (tracked) groups.insert(now.changed[k]->begin(), now.changed[k]->end());
      for (const auto& [earlier, t] : taken_) {
        if (k >= t.changed.size() || !t.changed[k]) {
          tracked = false;
          break;
        }
        groups.insert(t.changed[k]->begin(), t.changed[k]->end());
      }
      if (!tracked) continue;
      plan.groups[k] = std::vector<std::uint32_t>(groups.begin(), groups.end());
      // A group is a delta when every snapshot since the base that took it took its entries.
      // Its keys are those of one take as taken (each once already), or the union of several,
      // sorted: sorting short strings cost the loading bench 4% of its CPU when done always.
      std::map<std::uint32_t, std::vector<std::string>> deltas;
      std::map<std::uint32_t, int> takes; // how many takes gave keys of the group
      std::set<std::uint32_t> whole(rolled.begin(), rolled.end());
      std::set<std::uint32_t> taken_now; // groups that the take just made gave keys of
      auto add = [&](const Taken& t, bool is_now) {
        if (!t.entries[k]) {
          whole.insert(t.changed[k]->begin(), t.changed[k]->end());
          return;
        }
        for (std::uint32_t g : *t.changed[k]) {
          auto e = t.entries[k]->find(g);
          // A take left unresolved has no keys to join another's with: only a delta of this
          // take alone may be written from it (by the operator, which resolves it).
          const bool unresolved = k < t.unresolved.size() && t.unresolved[k].count(g);
          if (e == t.entries[k]->end() || (unresolved && (!is_now || takes[g] > 0))) {
            whole.insert(g);
          } else if (!whole.count(g)) {
            deltas[g].insert(deltas[g].end(), e->second.begin(), e->second.end());
            ++takes[g];
            if (is_now) taken_now.insert(g);
          }
        }
      };
      for (const auto& [earlier, t] : taken_) add(t, false);
      add(now, true);
      for (auto& [g, keys] : deltas) {
        if (whole.count(g)) continue;
        if (takes[g] == 1 && taken_now.count(g)) plan.deltas_of_this_take[k].insert(g);
        if (takes[g] > 1) {
          std::sort(keys.begin(), keys.end());
          keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
        }
        plan.deltas[k].emplace(g, std::move(keys));
      }
    }
  }
  // A full snapshot holds every slice whole.
  if (!plan.incremental()) now.whole_at.assign(slices(), id);
  now.previous = plan.previous;
  taken_[id] = std::move(now);
  // Forgetting the oldest snapshot is safe: it can no longer become a base, and a base after
  // it needs none of what changed before it.
  while (taken_.size() > 2 * kMaxUncompleted) taken_.erase(taken_.begin());
  return plan;
}

void IncrementalSnapshots::written(std::uint64_t id, std::uint64_t bytes) {
  if (auto t = taken_.find(id); t != taken_.end()) t->second.bytes = bytes;
}

void IncrementalSnapshots::completed(std::uint64_t id) {
  auto t = taken_.find(id);
  // A savepoint, or a checkpoint this task did not write a file of its own for: what changed
  // before it is still to be written.
  if (t == taken_.end() || !t->second.may_be_base || !t->second.bytes) return;
  Base base;
  base.id = id;
  base.files = t->second.previous;
  base.whole_at = t->second.whole_at;
  base.files.push_back({"../chk-" + std::to_string(id) + "/" + own_file_, *t->second.bytes});
  base_ = std::move(base);
  taken_.erase(taken_.begin(), std::next(t));
}

bool IncrementalSnapshots::continue_restored(const std::filesystem::path& root, std::uint64_t id,
                                             std::vector<CheckpointTaskFile::PreviousFile> files,
                                             const std::function<bool(std::size_t, std::uint32_t)>& holds_whole) {
  if (!settings_.enabled || files.empty() || files.size() > static_cast<std::size_t>(settings_.full_every))
    return false;
  // Without rolling the chain begins with the full snapshot it was started with (plan() drops
  // no file then), as start_full() expects of a base.
  Base base;
  base.id = id;
  for (std::size_t slice = 0; slice < slices(); ++slice) {
    const auto groups = slice_groups(slice);
    std::optional<std::uint64_t> newest;
    for (std::size_t f = files.size(); f-- > 0 && !newest;)
      if (std::all_of(groups.begin(), groups.end(), [&](std::uint32_t g) { return holds_whole(f, g); }))
        newest = previous_checkpoint_of(files[f].path);
    if (!newest) return false;
    base.whole_at.push_back(*newest);
  }
  base.files = std::move(files);
  base_ = std::move(base);
  taken_.clear();
  restored_root_ = root;
  return true;
}

} // namespace streamctl::runtime
