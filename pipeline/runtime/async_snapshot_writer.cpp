#include "pipeline/runtime/async_snapshot_writer.hpp"

#include <algorithm>
#include <chrono>

namespace streamctl::runtime {

AsyncSnapshotWriter::AsyncSnapshotWriter(SnapshotUploader* uploader)
    : uploader_(uploader), thread_([this] { run(); }) {}

AsyncSnapshotWriter::~AsyncSnapshotWriter() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    for (Queued& q : queue_) abandon_frozen(q.job);
    queue_.clear();
  }
  stop_writing_.store(true, std::memory_order_relaxed);
  cancel_upload_.store(true, std::memory_order_relaxed);
  wake_.notify_one();
  thread_.join();
}

void AsyncSnapshotWriter::submit(SnapshotJob job) { enqueue(Queued{std::move(job), std::nullopt}); }

void AsyncSnapshotWriter::submit(SnapshotJob job, ForkedSnapshot child) {
  forks_in_flight_.fetch_add(1, std::memory_order_acq_rel);
  enqueue(Queued{std::move(job), std::move(child)});
}

void AsyncSnapshotWriter::enqueue(Queued next) {
  std::vector<Queued> dropped; // destroyed after the lock: a forked one kills and reaps its child
  {
    std::lock_guard lock(mutex_);
    drop_older_locked(next.job.checkpoint_id, dropped);
    queue_.push_back(std::move(next));
  }
  wake_.notify_one();
}

void AsyncSnapshotWriter::drop_queued_before(std::uint64_t checkpoint_id) {
  std::vector<Queued> dropped; // destroyed after the lock (see enqueue)
  std::lock_guard lock(mutex_);
  drop_older_locked(checkpoint_id, dropped);
}

void AsyncSnapshotWriter::drop_older_locked(std::uint64_t checkpoint_id, std::vector<Queued>& dropped) {
  while (!queue_.empty() && queue_.front().job.checkpoint_id < checkpoint_id) {
    Queued& old = queue_.front();
    SnapshotWritten given_up;
    given_up.checkpoint_id = old.job.checkpoint_id;
    given_up.file_name = old.job.path.filename().string();
    given_up.error = "dropped before it was written: checkpoint " + std::to_string(checkpoint_id) +
                     " began, so this one had already been given up";
    completed_.push_back(std::move(given_up));
    has_completed_.store(true, std::memory_order_release);
    if (old.child) forks_in_flight_.fetch_sub(1, std::memory_order_acq_rel);
    abandon_frozen(old.job);
    dropped.push_back(std::move(old));
    queue_.pop_front();
  }
}

std::vector<SnapshotWritten> AsyncSnapshotWriter::take_completed() {
  if (!has_completed_.load(std::memory_order_acquire)) return {};
  std::lock_guard lock(mutex_);
  has_completed_.store(false, std::memory_order_relaxed);
  return std::exchange(completed_, {});
}

void AsyncSnapshotWriter::run() {
  for (;;) {
    std::optional<Queued> next;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      next.emplace(std::move(queue_.front()));
      queue_.pop_front();
    }
    SnapshotJob& job = next->job;
    SnapshotWritten written;
    try {
      written = next->child ? next->child->wait() : write(job, &stop_writing_);
    } catch (const std::exception& e) { // out of memory serialising a frozen group, say
      written.checkpoint_id = job.checkpoint_id;
      written.file_name = job.path.filename().string();
      written.error = std::string("cannot write the snapshot: ") + e.what();
    }
    if (uploader_) upload(job, written);
    std::lock_guard lock(mutex_);
    if (next->child) forks_in_flight_.fetch_sub(1, std::memory_order_acq_rel);
    completed_.push_back(std::move(written));
    has_completed_.store(true, std::memory_order_release);
  }
}

// The file goes to the coordinator, and from the staging directory whatever happened.
void AsyncSnapshotWriter::upload(const SnapshotJob& job, SnapshotWritten& written) {
  if (written.error.empty()) {
    auto start = std::chrono::steady_clock::now();
    if (auto ok = uploader_->upload(job.path, job.checkpoint_id, cancel_upload_); !ok)
      written.error = "cannot send " + written.file_name + " to the coordinator: " + ok.error();
    written.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  std::error_code ec;
  std::filesystem::remove(job.path, ec);
}

void AsyncSnapshotWriter::abandon_frozen(SnapshotJob& job) {
  // A set's segments mostly follow one another (a deferred take's deltas and the groups written
  // whole interleave): abandon() is idempotent, this only spares most repeats.
  const state::FrozenKeyGroups* last = nullptr;
  for (auto& segment : job.segments)
    if (segment.frozen && segment.frozen.get() != last) {
      segment.frozen->abandon();
      last = segment.frozen.get();
    }
}

SnapshotWritten AsyncSnapshotWriter::write(SnapshotJob& job, const std::atomic<bool>* stop) {
  struct AbandonRest { // on every return: the task must not serialise what will not be written
    SnapshotJob& job;
    ~AbandonRest() { abandon_frozen(job); }
  } abandon_rest{job};
  auto start = std::chrono::steady_clock::now();
  SnapshotWritten out;
  out.checkpoint_id = job.checkpoint_id;
  out.file_name = job.path.filename().string();
  // The coordinator creates the checkpoint's directory; one that is gone was given up (and
  // removed): writing into it again would leave an empty chk-N behind.
  auto writer = state::SnapshotWriter::create(job.path, std::move(job.header));
  if (!writer) {
    out.error = writer.error();
    return out;
  }
  // Deltas left frozen to be resolved first, before the file's other segments: each is small
  // (the entries that changed), and each the writer resolves is one the task need not resolve
  // when its first batch after the barrier touches the group (issue 12: the stall).
  std::vector<state::FrozenKeyGroups*> ahead; // each set once (deltas and wholes interleave)
  for (auto& segment : job.segments)
    if (segment.frozen && segment.kind == state::SegmentKind::KeyedDelta &&
        std::find(ahead.begin(), ahead.end(), segment.frozen.get()) == ahead.end()) {
      ahead.push_back(segment.frozen.get());
      segment.frozen->serialise_ahead();
    }
  for (auto& segment : job.segments) {
    if (stop != nullptr && stop->load(std::memory_order_relaxed)) {
      out.error = "the task ended before its snapshot was written";
      return out;
    }
    if (segment.frozen) {
      std::optional<std::string> bytes = segment.frozen->take(segment.frozen_index);
      if (!bytes) {
        out.error = "the task ended before its snapshot was written";
        return out;
      }
      segment.frozen.reset();
      if (bytes->empty() && !segment.keep_empty) continue;
      segment.bytes = std::move(*bytes);
    }
    if (auto ok = writer->add_segment(segment.node, segment.kind, segment.key_group, segment.bytes); !ok) {
      out.error = ok.error();
      return out;
    }
    // Free the serialised bytes as they go: the state may be as large as the task's memory.
    std::string().swap(segment.bytes);
  }
  auto summary = writer->finish();
  if (!summary) {
    out.error = summary.error();
    return out;
  }
  out.bytes = summary->file_bytes;
  out.raw_bytes = summary->raw_bytes;
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

} // namespace streamctl::runtime
