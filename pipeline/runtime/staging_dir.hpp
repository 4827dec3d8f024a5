#pragma once
// A directory of this process's own under $TMPDIR (or /tmp), PREFIX-PID.XXXXXX, mode 0700 (it
// holds snapshots of the job's state, which other users must not read), removed with whatever
// is in it when the object goes. A worker stages there the snapshot files it uploads to the
// coordinator (snapshot_uploader.hpp) and those it fetches from it (remote_checkpoint_files.hpp).
//
// A worker killed with -9 cannot remove its own: making one first removes the directories of
// the same prefix whose process no longer runs.

#include <filesystem>
#include <string>

#include "state/error.hpp"

namespace streamctl::runtime {

class StagingDir {
public:
  // Fails naming the place when it cannot be made.
  static Result<StagingDir> create(const std::string& prefix);

  StagingDir(StagingDir&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }
  StagingDir& operator=(StagingDir&& other) noexcept;
  StagingDir(const StagingDir&) = delete;
  StagingDir& operator=(const StagingDir&) = delete;
  ~StagingDir() { remove(); }

  const std::filesystem::path& path() const { return path_; }

private:
  explicit StagingDir(std::filesystem::path path) : path_(std::move(path)) {}
  void remove() noexcept;

  std::filesystem::path path_;
};

} // namespace streamctl::runtime
