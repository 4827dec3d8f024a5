#pragma once
// The background thread that compresses, checksums and writes a task's snapshot files
// (state/snapshot_format.hpp), so that the task goes on processing records while its state
// goes to disk (SPEC §7: the asynchronous part of a checkpoint, as Flink's).
//
// With [checkpoint] storage = "coordinator", the file is written into a private staging
// directory and sent to the coordinator from this same thread (snapshot_uploader.hpp); it
// counts as written once the coordinator has stored it, and is removed here either way.
//
// Threading: submit() and take_completed() are called from the task thread; the writing (and
// uploading, and waiting for a forked snapshot's process) happens on the writer's own thread.
// Jobs are written in the order submitted.
//
// Deferred snapshots ([checkpoint] snapshot = "deferred"): a segment may carry frozen key groups
// instead of bytes (SnapshotSegment::frozen); the writer serialises each in turn, on its own
// thread, unless the task did first (state/frozen_key_groups.hpp), so the file is written
// segment by segment in the same order and with the same bytes as when the task serialised
// them all. A job that is dropped, fails, or is still in hand when the writer is destroyed
// abandons the groups it has not serialised: the task never serialises groups for a file that
// will not be written, and no thread reads the operators' state once the writer is gone.
//
// Memory: a job still queued when a later checkpoint's job comes is dropped (reported as
// failed), so a task holds at most two snapshots at a time, the one being written and the
// newest. That loses nothing: the coordinator takes one checkpoint at a time and gives up the
// one pending before it starts another, so a checkpoint whose file is not yet written when a
// later barrier comes has already failed.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "pipeline/runtime/forked_snapshot.hpp"
#include "pipeline/runtime/snapshot_uploader.hpp"
#include "pipeline/runtime/task_chain.hpp"
#include "state/snapshot_format.hpp"

namespace streamctl::runtime {

struct SnapshotJob {
  std::uint64_t checkpoint_id = 0;
  std::filesystem::path path; // the snapshot file to write (in the staging dir when uploading)
  state::SnapshotHeader header;
  std::vector<SnapshotSegment> segments;
};

struct SnapshotWritten {
  std::uint64_t checkpoint_id = 0;
  std::string file_name;     // within its checkpoint directory
  std::uint64_t bytes = 0;   // size of the file
  std::uint64_t raw_bytes = 0;
  double seconds = 0;        // time to compress and write
  std::string error;         // empty when the file is durable (stored by the coordinator)
};

class AsyncSnapshotWriter {
public:
  // `uploader`: send each file to the coordinator once written; it must outlive this object.
  explicit AsyncSnapshotWriter(SnapshotUploader* uploader = nullptr);
  // Finishes the file in hand (a half-written one is removed by SnapshotWriter), cuts short an
  // upload in progress, and drops the files still queued.
  ~AsyncSnapshotWriter();
  AsyncSnapshotWriter(const AsyncSnapshotWriter&) = delete;
  AsyncSnapshotWriter& operator=(const AsyncSnapshotWriter&) = delete;

  void submit(SnapshotJob job);
  // A job whose file a child process writes ([checkpoint] snapshot = "fork"): the writer
  // waits for it in turn (and uploads the file when it must), instead of writing
  // job.segments.
  void submit(SnapshotJob job, ForkedSnapshot child);
  // Drops the jobs still queued for checkpoints before `checkpoint_id` (given up once a later
  // checkpoint begins; submit does the same), abandoning their frozen groups. Called at a
  // barrier before the task completes the last deferred snapshot, so that it does not
  // serialise groups of a snapshot about to be dropped.
  void drop_queued_before(std::uint64_t checkpoint_id);
  // Forked snapshots submitted and not yet written: a task forks again only at zero, so that
  // at most one copy-on-write image of its state exists at a time.
  int forks_in_flight() const { return forks_in_flight_.load(std::memory_order_acquire); }
  // Jobs waiting for the writer's thread (not the one it is writing).
  std::size_t queued() const {
    std::lock_guard lock(mutex_);
    return queue_.size();
  }
  // Writes job's file (compressed, checksummed, fsynced, renamed into place); any thread.
  // `stop`: when it becomes true, the write gives up between two segments (the file is not
  // written). Frozen groups the job still holds are abandoned whatever happens.
  static SnapshotWritten write(SnapshotJob& job, const std::atomic<bool>* stop = nullptr);
  // Abandons the frozen groups of `job`'s segments (FrozenKeyGroups::abandon).
  static void abandon_frozen(SnapshotJob& job);
  // What has been written (or has failed) since the last call; cheap when nothing has.
  std::vector<SnapshotWritten> take_completed();

private:
  struct Queued {
    SnapshotJob job;
    std::optional<ForkedSnapshot> child;
  };

  void enqueue(Queued next);
  // Under mutex_: moves the queued jobs before `checkpoint_id` to `dropped`, reporting each as
  // given up.
  void drop_older_locked(std::uint64_t checkpoint_id, std::vector<Queued>& dropped);
  void run();
  void upload(const SnapshotJob& job, SnapshotWritten& written);

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Queued> queue_;
  std::atomic<int> forks_in_flight_{0};
  std::vector<SnapshotWritten> completed_;
  std::atomic<bool> has_completed_{false};
  bool stopping_ = false;
  std::atomic<bool> cancel_upload_{false};
  std::atomic<bool> stop_writing_{false}; // the destructor: the job in hand stops between segments
  SnapshotUploader* uploader_;
  std::thread thread_;
};

} // namespace streamctl::runtime
