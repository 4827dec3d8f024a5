#include "pipeline/runtime/savepoint_adoption.hpp"

#include "pipeline/runtime/checkpoint_metadata.hpp"
#include "state/durable_file.hpp"

namespace streamctl::runtime {

namespace fs = std::filesystem;

Result<fs::path> adopt_savepoint(const fs::path& root, const fs::path& savepoint, const std::string& job_name) {
  const fs::path from = checkpoint_dir_of(savepoint);
  auto metadata = read_metadata(from);
  if (!metadata) return Failure{metadata.error()};
  CheckpointMetadata m = std::move(*metadata);
  if (m.kind != "savepoint") return fail(from.string() + " is not a savepoint");
  if (m.job_name != job_name) return fail("the savepoint is of job '" + m.job_name + "'");
  if (m.version < 2) return fail("the savepoint's metadata is version " + std::to_string(m.version));
  for (const auto& task : m.tasks)
    if (!task.previous.empty()) return fail("the savepoint names earlier files");

  auto newest = newest_snapshot_id(root, from);
  if (!newest) return Failure{newest.error()};
  if (*newest && **newest >= m.checkpoint_id)
    return fail(root.string() + " holds a snapshot as new as the savepoint's id " + std::to_string(m.checkpoint_id) +
                " or newer");

  const fs::path to = root / ("chk-" + std::to_string(m.checkpoint_id));
  std::error_code ec;
  if (!fs::create_directory(to, ec) || ec)
    return fail("cannot create " + to.string() + (ec ? ": " + ec.message() : std::string(": it exists")));
  // What is linked so far goes again when a link fails: a chk-S without _metadata would be
  // pruned all the same, but only by the next checkpoint.
  auto give_up = [&](std::string why) -> Result<fs::path> {
    std::error_code rm;
    fs::remove_all(to, rm);
    return fail(std::move(why));
  };
  for (const auto& task : m.tasks) {
    fs::create_hard_link(from / task.file, to / task.file, ec);
    if (ec) return give_up("cannot link " + (from / task.file).string() + " into " + to.string() + ": " + ec.message());
  }
  if (auto synced = state::sync_directory(to); !synced) return give_up(synced.error());
  if (auto synced = state::sync_directory(root); !synced) return give_up(synced.error());
  m.kind = "checkpoint";
  if (auto written = write_metadata(to, m); !written) return give_up(written.error());
  return to;
}

} // namespace streamctl::runtime
