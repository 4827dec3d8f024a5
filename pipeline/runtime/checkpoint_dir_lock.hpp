#pragma once
// CHECKPOINT_DIR/NAME/lock, held (flock) by the one run of a job that may write snapshots into
// that directory or resume from it: a job with periodic checkpoints, and every `run --resume`
// or `run --savepoint-on-exit`, with or without [checkpoint]. So two runs of one pipeline never
// write the same chk-N, and two overlapping cron runs never both resume from one savepoint and
// publish what follows it twice. The kernel drops the lock when its holder dies, however it
// dies (kill -9 included): a lock file left behind by a dead run is not held.
//
// The file's content only names the holder, for the message that refuses the next run; nothing
// else reads it, so it has no version: one text line "PID JOB_ID\n", JOB_ID empty until the
// holder's job is registered.

#include <chrono>
#include <filesystem>
#include <string>

namespace spdlog {
class logger;
}

namespace streamctl::runtime {

class CheckpointDirLock {
public:
  static constexpr std::chrono::milliseconds kWaitForever = std::chrono::milliseconds::max();

  // Creates `root` if needed and takes its lock, waiting up to `wait` while another run holds
  // it (0: not at all; kWaitForever), logging once to `log` (if any) that it waits. Throws
  // Error(Usage), starting with `file` (the pipeline file) as validation messages do, when the
  // directory cannot be created or written, or another run still holds the lock (its pid and
  // job id in the message).
  CheckpointDirLock(const std::filesystem::path& root, const std::string& file,
                    std::chrono::milliseconds wait = std::chrono::milliseconds(0),
                    spdlog::logger* log = nullptr);
  // Closing the descriptor drops the lock (unless a forked child still has it: `run --detach`
  // hands the lock to the job's process that way).
  ~CheckpointDirLock();
  CheckpointDirLock(const CheckpointDirLock&) = delete;
  CheckpointDirLock& operator=(const CheckpointDirLock&) = delete;

  const std::filesystem::path& root() const { return root_; }
  // Writes this process's pid and `job_id` into the lock file, for the message that refuses
  // the next run (the constructor writes the pid alone). Best effort: a lock whose holder
  // cannot be named is still held.
  void record_holder(const std::string& job_id) const;
  // "pid 123, job ID" as the lock file names its holder ("its holder unknown" when it names
  // none: an old lock file, or one its holder has not written yet).
  static std::string holder_of(const std::filesystem::path& lock_file);

private:
  std::filesystem::path root_;
  int fd_ = -1;
};

} // namespace streamctl::runtime
