#include "pipeline/runtime/checkpoint_restore.hpp"

#include <algorithm>

#include "pipeline/runtime/checkpoint_completeness.hpp"

namespace streamctl::runtime {

namespace fs = std::filesystem;

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
    r.readers_.push_back(std::move(*reader));
  }
  if (auto ok = check_chain_ids(r.metadata_, chain_ids, r.dir_.string()); !ok) return Failure{ok.error()};
  return r;
}

Result<void> CheckpointRestore::verify() {
  for (auto& reader : readers_)
    if (auto ok = reader.verify(); !ok) return Failure{ok.error()};
  return {};
}

bool CheckpointRestore::has_node(const std::string& node) const {
  for (const auto& t : metadata_.tasks)
    if (std::find(t.nodes.begin(), t.nodes.end(), node) != t.nodes.end()) return true;
  return false;
}

Result<std::optional<std::string>> CheckpointRestore::keyed(const std::string& node, std::uint32_t key_group) {
  for (auto& reader : readers_) {
    const state::SnapshotHeader& h = reader.header();
    if (!h.key_groups.contains(key_group)) continue;
    if (std::find(h.chain_nodes.begin(), h.chain_nodes.end(), node) == h.chain_nodes.end()) continue;
    const state::SegmentInfo* segment = reader.find(node, state::SegmentKind::Keyed, key_group);
    if (!segment) return std::optional<std::string>{};
    auto bytes = reader.read_segment(*segment);
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
