#pragma once
// A task snapshot taken by a child process ([checkpoint] snapshot = "fork"), so that the task
// pauses for a fork(), not for the serialisation of its whole state. fork() gives the child a
// copy-on-write image of the worker at the barrier; the child serialises the operators' state
// from it, writes the snapshot file (compressed, checksummed, fsynced, as AsyncSnapshotWriter
// does), reports the outcome through a pipe and ends with _exit. The task goes on processing
// at once; the kernel copies a page of its state only when the task writes to it while the
// child still runs, so the memory an in-flight snapshot costs is what the task changes
// meanwhile, at most the state's size. This is how Redis takes its background saves.
//
// In the child only the forking thread exists: it runs the operators' const snapshot methods
// and the snapshot writer (malloc is fork-safe in glibc), and nothing that another thread of
// the worker might have held a lock in (no logging, no ZeroMQ). It closes every inherited
// descriptor but its pipe first, so that a socket of the worker never outlives it, and dies
// with the thread that forked it (PR_SET_PDEATHSIG), so that kill -9 of the worker leaves no
// child writing behind.
//
// A child that has not reported by its deadline (the checkpoint's timeout) is killed, as a
// hung one would otherwise hold up every later snapshot of its task.
//
// Report (the pipe, once, then EOF): text, "<file bytes> <raw bytes> <seconds>\n<error>",
// the error empty when the file is durable. A child that dies without a full report fails
// the snapshot with its exit status.
//
// Threading: start() on the task thread; wait() on any one thread (the snapshot writer's).

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "pipeline/runtime/task_chain.hpp"
#include "state/error.hpp"

namespace streamctl::runtime {

struct SnapshotJob;
struct SnapshotWritten;

class ForkedSnapshot {
public:
  // Forks. In the child: job.segments = segments(), then the file is written as
  // AsyncSnapshotWriter::write does, and the outcome is reported. `segments` runs only in the
  // child, before start() returns in the parent or not at all; a failure to fork is returned.
  // A child that has not reported within `timeout` is killed, and its snapshot fails: a
  // child that hangs must not hold up every later snapshot of its task.
  static Result<ForkedSnapshot> start(SnapshotJob job, const std::function<std::vector<SnapshotSegment>()>& segments,
                                      std::chrono::milliseconds timeout);
  // Whether this build can fork snapshots: not under AddressSanitizer, whose allocator (GCC
  // 12's) is not fork-safe: a child forked while another thread of the worker held one of
  // its locks waits for it forever. Empty when it can; else why not.
  static std::string unavailable_reason();

  ForkedSnapshot(ForkedSnapshot&& other) noexcept;
  ForkedSnapshot& operator=(ForkedSnapshot&& other) noexcept;
  ForkedSnapshot(const ForkedSnapshot&) = delete;
  ForkedSnapshot& operator=(const ForkedSnapshot&) = delete;
  // A child still running is killed and reaped (its temporary file is left to the
  // checkpoint's pruning, as a killed worker's is).
  ~ForkedSnapshot();

  // Blocks until the child has reported and exited; the outcome as AsyncSnapshotWriter's.
  SnapshotWritten wait();
  pid_t pid() const { return pid_; }

private:
  ForkedSnapshot(pid_t pid, int report_fd, std::uint64_t checkpoint_id, std::string file_name,
                 std::chrono::steady_clock::time_point deadline);
  void kill_and_reap();

  std::chrono::steady_clock::time_point deadline_;
  pid_t pid_ = -1;
  int report_fd_ = -1;
  std::uint64_t checkpoint_id_ = 0;
  std::string file_name_;
};

} // namespace streamctl::runtime
