#include "pipeline/runtime/checkpoint_restore.hpp"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

#include "pipeline/runtime/checkpoint_completeness.hpp"

namespace streamctl::runtime {

namespace fs = std::filesystem;

namespace {

// The `previous` files of an incremental checkpoint's task, oldest first, each checked against
// the task's own file: the same chain, subtask and parallelism, the checkpoint its path names,
// the size _metadata gives. A missing one is named with the checkpoint that needs it.
Result<std::vector<state::SnapshotReader>> open_previous(const fs::path& dir, const CheckpointTaskFile& task,
                                                         const state::SnapshotReader& newest) {
  std::vector<state::SnapshotReader> out;
  for (const auto& p : task.previous) {
    const fs::path file = (dir / p.path).lexically_normal();
    std::error_code ec;
    if (!fs::exists(file, ec))
      return fail(file.string() + ": missing, but checkpoint " + dir.string() +
                  " builds on it (an incremental checkpoint's earlier file): nothing was restored");
    auto reader = state::SnapshotReader::open(file);
    if (!reader) return Failure{reader.error() + " (checkpoint " + dir.string() + " builds on it)"};
    const state::SnapshotHeader& h = reader->header();
    const state::SnapshotHeader& n = newest.header();
    if (h.max_parallelism != n.max_parallelism || h.subtask != n.subtask || h.parallelism != n.parallelism ||
        h.chain_nodes != n.chain_nodes || h.chain_id != n.chain_id ||
        std::optional<std::uint64_t>(h.checkpoint_id) != previous_checkpoint_of(p.path))
      return fail(file.string() + ": is not the earlier file of task '" + task.file + "' that " +
                  (dir / kMetadataFile).string() + " names");
    if (reader->file_size() != p.bytes)
      return fail(file.string() + ": " + std::to_string(reader->file_size()) + " bytes, but " +
                  (dir / kMetadataFile).string() + " says " + std::to_string(p.bytes));
    out.push_back(std::move(*reader));
  }
  return out;
}

} // namespace

Result<CheckpointRestore> CheckpointRestore::open(const fs::path& path) {
  CheckpointRestore r;
  r.dir_ = checkpoint_dir_of(path);
  auto metadata = read_metadata(r.dir_);
  if (!metadata) return Failure{metadata.error()};
  r.metadata_ = std::move(*metadata);
  std::vector<std::uint32_t> chain_ids;
  for (const auto& task : r.metadata_.tasks) {
    auto reader = state::SnapshotReader::open(r.dir_ / task.file);
    if (!reader) return Failure{reader.error()};
    const state::SnapshotHeader& h = reader->header();
    if (h.max_parallelism != static_cast<std::uint32_t>(r.metadata_.max_parallelism) ||
        h.subtask != static_cast<std::uint32_t>(task.subtask) ||
        h.parallelism != static_cast<std::uint32_t>(task.parallelism) || h.chain_nodes != task.nodes ||
        h.checkpoint_id != r.metadata_.checkpoint_id)
      return fail((r.dir_ / task.file).string() + ": does not match what _metadata says of it");
    if (reader->file_size() != task.bytes)
      return fail((r.dir_ / task.file).string() + ": " + std::to_string(reader->file_size()) +
                  " bytes, but _metadata says " + std::to_string(task.bytes));
    chain_ids.push_back(h.chain_id);
    for (const auto& segment : reader->segments()) r.nodes_with_state_.insert(segment.node);
    auto earlier = open_previous(r.dir_, task, *reader);
    if (!earlier) return Failure{earlier.error()};
    for (const auto& older : *earlier)
      for (const auto& segment : older.segments()) r.nodes_with_state_.insert(segment.node);
    r.readers_.push_back(std::move(*reader));
    r.earlier_.push_back(std::move(*earlier));
  }
  if (auto ok = check_chain_ids(r.metadata_, chain_ids, r.dir_.string()); !ok) return Failure{ok.error()};
  return r;
}

std::vector<const state::SnapshotReader*> CheckpointRestore::task_files(std::size_t task) const {
  std::vector<const state::SnapshotReader*> out;
  for (const auto& reader : earlier_.at(task)) out.push_back(&reader);
  out.push_back(&readers_.at(task));
  return out;
}

Result<void> CheckpointRestore::verify() {
  for (auto& reader : readers_)
    if (auto ok = reader.verify(); !ok) return Failure{ok.error()};
  for (auto& chain : earlier_)
    for (auto& reader : chain)
      if (auto ok = reader.verify(); !ok) return Failure{ok.error()};
  return {};
}

CheckpointRestore::KeyedSegment CheckpointRestore::newest_keyed(std::size_t task, const std::string& node,
                                                                std::uint32_t key_group) const {
  KeyedSegment out{key_group, nullptr, nullptr, {}};
  // Newest first: deltas until the first keyed segment.
  auto visit = [&](const state::SnapshotReader& reader) {
    if (const state::SegmentInfo* s = reader.find(node, state::SegmentKind::Keyed, key_group)) {
      out.reader = &reader;
      out.segment = s;
      return true;
    }
    if (const state::SegmentInfo* s = reader.find(node, state::SegmentKind::KeyedDelta, key_group))
      out.deltas.push_back({&reader, s});
    return false;
  };
  bool found = visit(readers_[task]);
  const auto& chain = earlier_[task];
  for (auto reader = chain.rbegin(); !found && reader != chain.rend(); ++reader) found = visit(*reader);
  std::reverse(out.deltas.begin(), out.deltas.end());
  return out;
}

bool CheckpointRestore::has_node(const std::string& node) const {
  for (const auto& t : metadata_.tasks)
    if (std::find(t.nodes.begin(), t.nodes.end(), node) != t.nodes.end()) return true;
  return false;
}

Result<std::optional<std::string>> CheckpointRestore::keyed(const std::string& node, std::uint32_t key_group) {
  for (std::size_t task = 0; task < readers_.size(); ++task) {
    const state::SnapshotHeader& h = readers_[task].header();
    if (!h.key_groups.contains(key_group)) continue;
    if (std::find(h.chain_nodes.begin(), h.chain_nodes.end(), node) == h.chain_nodes.end()) continue;
    auto [group, reader, segment, deltas] = newest_keyed(task, node, key_group);
    if (!deltas.empty())
      return fail(readers_[task].path().string() + ": key group " + std::to_string(key_group) + " of node " +
                  node + " is a delta on earlier files: only its operator can read it");
    // An empty segment: the group was emptied after an earlier file held it.
    if (!segment || segment->raw_length == 0) return std::optional<std::string>{};
    auto bytes = reader->read_segment_concurrently(*segment);
    if (!bytes) return Failure{bytes.error()};
    return std::optional<std::string>{std::move(*bytes)};
  }
  return std::optional<std::string>{};
}

Result<std::vector<std::string>> CheckpointRestore::per_subtask(const std::string& node, state::SegmentKind kind) {
  std::vector<std::string> out;
  for (auto& reader : readers_) {
    const state::SnapshotHeader& h = reader.header();
    if (std::find(h.chain_nodes.begin(), h.chain_nodes.end(), node) == h.chain_nodes.end()) continue;
    if (out.size() < h.parallelism) out.resize(h.parallelism);
    const state::SegmentInfo* segment = reader.find(node, kind);
    if (!segment) continue;
    auto bytes = reader.read_segment(*segment);
    if (!bytes) return Failure{bytes.error()};
    out[h.subtask] = std::move(*bytes);
  }
  return out;
}

std::vector<CheckpointRestore::KeyedSegment> CheckpointRestore::keyed_segments(const std::string& node,
                                                                               state::KeyGroupRange range) const {
  std::vector<KeyedSegment> out;
  for (std::uint32_t group = range.first; group < range.end; ++group)
    for (std::size_t task = 0; task < readers_.size(); ++task) { // as keyed(): the first task owning the group
      const state::SnapshotHeader& h = readers_[task].header();
      if (!h.key_groups.contains(group)) continue;
      if (std::find(h.chain_nodes.begin(), h.chain_nodes.end(), node) == h.chain_nodes.end()) continue;
      KeyedSegment where = newest_keyed(task, node, group);
      if (where.segment && where.segment->raw_length == 0) where.segment = nullptr, where.reader = nullptr;
      if (where.segment || !where.deltas.empty()) out.push_back(std::move(where));
      break;
    }
  return out;
}

namespace {

// One key group on its way: filled by a helper, consumed by the task thread.
struct GroupSlot {
  std::string bytes; // the segment, kept only for an operator that restores on the task thread
  std::unique_ptr<operators::Operator::KeyGroupLoad> load;
  std::string error;
  bool ready = false;
};

std::string in_group(std::uint32_t group, const std::string& why) {
  return "key group " + std::to_string(group) + ": " + why;
}

// Reads and decodes one group; safe on any thread (the reader and the load are).
void load_group(const CheckpointRestore::KeyedSegment& where, const operators::Operator& op, GroupSlot& slot) {
  try {
    std::string full;
    if (where.segment) {
      auto bytes = where.reader->read_segment_concurrently(*where.segment);
      if (!bytes) {
        slot.error = bytes.error();
        return;
      }
      full = std::move(*bytes);
    }
    Result<std::unique_ptr<operators::Operator::KeyGroupLoad>> load = std::unique_ptr<operators::Operator::KeyGroupLoad>{};
    if (where.deltas.empty()) {
      load = op.load_key_group(where.key_group, full);
    } else {
      std::vector<std::string> deltas;
      for (const auto& d : where.deltas) {
        auto delta = d.reader->read_segment_concurrently(*d.segment);
        if (!delta) {
          slot.error = delta.error();
          return;
        }
        deltas.push_back(std::move(*delta));
      }
      load = op.load_key_group_with_deltas(where.key_group, full,
                                           std::vector<std::string_view>(deltas.begin(), deltas.end()));
      if (load && !*load) load = fail("the operator loaded no group from its deltas");
    }
    if (!load) {
      slot.error = in_group(where.key_group, load.error());
      return;
    }
    slot.load = std::move(*load);
    if (!slot.load) slot.bytes = std::move(full);
  } catch (const std::exception& e) {
    slot.error = in_group(where.key_group, e.what());
  }
}

// Hands one loaded group to the operator, on the task thread.
Result<void> install_group(std::uint32_t group, operators::Operator& op, GroupSlot& slot) {
  if (!slot.error.empty()) return fail(slot.error);
  Result<void> ok = slot.load ? slot.load->install() : op.restore_key_group(group, slot.bytes);
  slot.load.reset();
  std::string().swap(slot.bytes);
  if (!ok) return fail(in_group(group, ok.error()));
  return {};
}

} // namespace

Result<void> restore_key_groups(const CheckpointRestore& restore, const std::string& node,
                                state::KeyGroupRange range, operators::Operator& op,
                                const std::function<bool(std::uint32_t)>& skip) {
  auto segments = restore.keyed_segments(node, range);
  if (skip) std::erase_if(segments, [&](const auto& s) { return skip(s.key_group); });
  std::vector<GroupSlot> slots(segments.size());
  const std::size_t helpers =
      std::min<std::size_t>(std::max(1u, std::thread::hardware_concurrency()), segments.size());
  if (helpers <= 1) {
    for (std::size_t k = 0; k < segments.size(); ++k) {
      load_group(segments[k], op, slots[k]);
      if (auto ok = install_group(segments[k].key_group, op, slots[k]); !ok) return ok;
    }
    return {};
  }
  // Helpers run at most this many groups ahead of the installs: a group read for an operator
  // that restores on the task thread holds its decompressed bytes until then, and a join's
  // state could otherwise be read whole into memory before the first group is installed.
  const std::size_t max_ahead = 4 * helpers;
  std::mutex mutex;
  std::condition_variable changed; // a group loaded, installed, or the restore stopped
  std::size_t next = 0;            // the next group a helper takes (under mutex)
  std::size_t installed = 0;       // groups installed so far (under mutex)
  bool stop = false;               // under mutex
  Result<void> result;
  {
    // Declared after the slots, so joined (at the end of this block) before they go.
    std::vector<std::jthread> pool;
    for (std::size_t t = 0; t < helpers; ++t)
      pool.emplace_back([&] {
        for (;;) {
          std::size_t k;
          {
            std::unique_lock lock(mutex);
            changed.wait(lock, [&] { return stop || next >= segments.size() || next < installed + max_ahead; });
            if (stop || next >= segments.size()) return;
            k = next++;
          }
          load_group(segments[k], op, slots[k]);
          {
            std::lock_guard lock(mutex);
            slots[k].ready = true;
          }
          changed.notify_all();
        }
      });
    for (std::size_t k = 0; k < segments.size(); ++k) {
      {
        std::unique_lock lock(mutex);
        changed.wait(lock, [&] { return slots[k].ready; });
      }
      result = install_group(segments[k].key_group, op, slots[k]);
      {
        std::lock_guard lock(mutex);
        installed = k + 1;
        // On a failure the helpers finish the group in hand; what they loaded is dropped.
        if (!result) stop = true;
      }
      changed.notify_all();
      if (!result) break;
    }
  }
  return result;
}

std::vector<std::string> check_restore_compatible(const CheckpointRestore& restore, const pipeline::PipelineSpec& spec,
                                                  bool allow_non_restored_state) {
  std::vector<std::string> problems;
  const std::string where = restore.dir().string() + ": ";
  if (restore.metadata().max_parallelism != spec.max_parallelism)
    problems.push_back(where + "written with max_parallelism " + std::to_string(restore.metadata().max_parallelism) +
                       ", the pipeline has " + std::to_string(spec.max_parallelism) +
                       ": restoring would move keys to other key groups, so it is refused "
                       "(set max_parallelism = " + std::to_string(restore.metadata().max_parallelism) + ")");
  if (allow_non_restored_state) return problems;
  for (const auto& node : restore.nodes_with_state()) {
    bool present = std::any_of(spec.nodes.begin(), spec.nodes.end(), [&](const auto& n) { return n.name == node; });
    if (!present)
      problems.push_back(where + "holds state of node '" + node +
                         "', which the pipeline no longer has; run with --allow-non-restored-state to drop it");
  }
  return problems;
}

} // namespace streamctl::runtime
