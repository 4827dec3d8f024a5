#pragma once
// CHECKPOINT_DIR/NAME/lock, held (flock) while a job with periodic checkpoints runs, so that
// two runs of one pipeline never write the same chk-N. The kernel drops the lock when the
// coordinator dies, however it dies.

#include <filesystem>
#include <string>

namespace streamctl::runtime {

class CheckpointDirLock {
public:
  // Creates `root` if needed and takes its lock. Throws Error(Usage), starting with `file`
  // (the pipeline file) as validation messages do, when the directory cannot be created or
  // written, or another run holds the lock.
  CheckpointDirLock(const std::filesystem::path& root, const std::string& file);
  ~CheckpointDirLock();
  CheckpointDirLock(const CheckpointDirLock&) = delete;
  CheckpointDirLock& operator=(const CheckpointDirLock&) = delete;

private:
  int fd_ = -1;
};

} // namespace streamctl::runtime
