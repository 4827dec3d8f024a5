#pragma once
// The operator model: what sources, operators and sinks see of the job.
//
// Everything here works on batches, never on single records, and sees no sockets and no
// processes: the worker's task loop (pipeline/runtime) moves batches between a fused chain of
// these objects and the data plane, and a unit test can drive them directly
// (tests/unit/operators/harness.hpp).
//
// Threading: every method is called from the one task thread that owns the object (but what
// freeze_key_groups returns, which the snapshot writer's thread runs).

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <span>
#include <string_view>
#include <vector>

#include "operators/wall_clock.hpp"
#include "pipeline/spec/pipeline_spec.hpp"
#include "state/batch.hpp"
#include "state/changed_entries.hpp"
#include "state/error.hpp"
#include "state/field_names.hpp"

namespace streamctl::state {
class FrozenKeyGroups; // state/frozen_key_groups.hpp
} // namespace streamctl::state

namespace streamctl::operators {

// Handles a record that cannot be processed, per the node's `on_error` (SPEC §4).
// bad_record() throws streamctl::Error(JobFailed) for on_error = "fail".
class RecordErrors {
public:
  virtual ~RecordErrors() = default;
  // `raw` is the input text (or the record as JSON); `line` is 1-based, 0 when the input has
  // no lines.
  virtual void bad_record(std::string_view raw, std::uint64_t line, std::string_view reason) = 0;
  virtual std::uint64_t count() const = 0;
};

struct OperatorContext {
  const pipeline::PipelineSpec* pipeline = nullptr;
  const pipeline::NodeSpec* node = nullptr;
  int subtask = 0;     // index of this subtask, 0-based
  int parallelism = 1; // subtasks of this node
  state::FieldNames* names = nullptr;
  RecordErrors* errors = nullptr;
  // Where a window puts the records it finds late, when another node reads its `late_output`
  // (SPEC §6); null when nobody does: late records are then dropped and counted as bad
  // records. Append with add_shared after retain_memory_of(in) (the chain clears it).
  state::Batch* late_output = nullptr;
  // Processing time, wall-clock epoch ms; a test may substitute its own clock.
  std::function<std::int64_t()> now_ms = wall_clock_ms;
  // Where a source that cannot seek (stdin) spools what it reads so that a restore can replay
  // it; its positions name files in it. Empty when the job takes no checkpoints.
  std::filesystem::path checkpoint_dir;
  // Logs a warning a person should see (a source that resumes otherwise than its position
  // said: an input file rotated since the snapshot). Called from the task thread; may be
  // empty (unit tests), and then nothing is logged.
  std::function<void(const std::string&)> warn;
  // Names the run (the job id) in the files every attempt of it shares: a source restarted
  // from the beginning, or again from the same checkpoint, finds what earlier attempts of
  // the run spooled. Empty in tests: each source object is then a run of its own.
  std::string run_tag;
  // Called from on_watermark, on_processing_time or finish: passes what the operator has
  // appended to `out` so far downstream, as if the call had returned it, and clears `out`. An
  // operator that fires many windows at once (the end of input fires every one) calls it every
  // few thousand rows so that its output never holds them all. Everything the call emits still
  // reaches downstream before the watermark is forwarded and before any barrier. Outside those
  // three calls it does nothing; empty in unit tests (then the operator keeps appending to
  // `out`). The operator must not touch other state of the chain meanwhile (it cannot).
  std::function<void(state::Batch& out)> pass_on_fired;
};

// The state an operator holds (Operator::state_footprint).
struct StateFootprint {
  std::uint64_t entries = 0;
  std::uint64_t bytes = 0;
};

class Operator {
public:
  virtual ~Operator() = default;
  virtual void open(OperatorContext& ctx) { ctx_ = ctx; }
  // Appends the results of `in` to `out`. `out` may retain `in`'s memory to share values.
  virtual void process(const state::Batch& in, state::Batch& out) = 0;
  // A batch from input number `input` (its position in the node's `inputs`): only a node
  // that tells its inputs apart (a join: 0 left, 1 right) overrides this.
  virtual void process_input(int /*input*/, const state::Batch& in, state::Batch& out) {
    process(in, out);
  }
  // The watermark has advanced to `watermark` (epoch ms; INT64_MAX at the end of input): no
  // record with an event time at or below it is expected any more. Emit what that completes.
  virtual void on_watermark(std::int64_t /*watermark*/, state::Batch& /*out*/) {}
  // Processing time has reached `now_ms` (wall-clock epoch ms): fire processing-time timers.
  // Called about every 100 ms, whether or not records arrive.
  virtual void on_processing_time(std::int64_t /*now_ms*/, state::Batch& /*out*/) {}
  // All input has ended; emit what is still held.
  virtual void finish(state::Batch& /*out*/) {}

  // --- Checkpointed state (SPEC §7). Called between batches, never during one. ---
  //
  // Keyed state is written one key group at a time, so that a restore at another parallelism
  // reads just the groups each new subtask owns. Each segment is the operator's own
  // self-describing bytes (field names, not process-local FieldIds; a version byte first);
  // the snapshot file (state/snapshot_format.hpp) compresses and checksums them.
  virtual bool has_state() const { return false; }
  // What the operator holds now, for metrics (`status`, Prometheus): keyed entries (keys, or
  // (key, window) pairs) and heap bytes. Called on the task's thread between batches, about
  // once a second, so it may walk the state.
  virtual StateFootprint state_footprint() const { return {}; }
  // Appends the state of `key_group` (one this subtask owns) to `out`; appends nothing when
  // the group holds nothing.
  virtual void snapshot_key_group(std::uint32_t /*key_group*/, std::string& /*out*/) const {}
  // Incremental checkpoints ([checkpoint] incremental): appends to `out` the key groups of
  // this subtask whose snapshot_key_group may have changed since the last call, and forgets
  // them (state/changed_groups.hpp). False: the operator does not keep track, and every group
  // is written in every checkpoint.
  virtual bool take_changed_key_groups(std::vector<std::uint32_t>& /*out*/) { return false; }
  // Entry-level deltas: called right after take_changed_key_groups, appends to `out` the
  // groups among those it took whose changes the operator knows entry by entry, each with the
  // keys (its own bytes) of the entries inserted, updated or erased since the last call
  // (state/changed_entries.hpp); a group taken there and absent here is written whole. The
  // first call starts the tracking, and appends nothing. False: the operator writes no
  // deltas (and snapshot_key_group_delta is never called).
  //
  // `deferred`: the snapshot is deferred (freeze_key_groups), and defer_key_group_deltas is
  // called at this barrier whatever the plan. The operator may then leave a group's keys
  // unresolved (GroupEntries::unresolved: no keys), to be resolved off the barrier: such a
  // group, when the plan writes it as a delta of this take alone, is among what
  // defer_key_group_deltas returns, always; the plan writes it whole otherwise.
  virtual bool take_changed_entries(std::vector<state::GroupEntries>& /*out*/, bool /*deferred*/) { return false; }
  // Appends to `out` a delta of `key_group` (a keyed_delta segment, state/snapshot_format.hpp):
  // `keys` holds every key that take_changed_entries gave for the group since some earlier
  // snapshot of it (each once, in no set order); the delta holds each such entry as it is now, or its
  // erasure, plus whatever else the group keeps (timers) whole, so that applying it to the
  // group as that earlier snapshot left it gives the group now. Returns false, appending
  // nothing, when so much of the group changed that writing it whole (snapshot_key_group) is
  // cheaper (ChangedEntries::delta_pays): it is written whole.
  virtual bool snapshot_key_group_delta(std::uint32_t /*key_group*/, const std::vector<std::string>& /*keys*/,
                                        std::string& /*out*/) const {
    return false;
  }
  // Deltas serialised off the task: called at the barrier right after take_changed_entries
  // (nothing changed in between), with some of the deltas the snapshot writes (`deltas`: group,
  // and the keys as snapshot_key_group_delta would get them). For those whose entries the
  // operator copied as it took them (each key of the delta among them), returns the copies as
  // a FrozenKeyGroups of groups copied already (state/frozen_key_groups.hpp), its groups in the
  // order given; each serialises, on the snapshot writer's thread, into exactly the bytes
  // snapshot_key_group_delta would append now. The rest, and all of them when it returns
  // nullptr (the default), are written by snapshot_key_group_delta. Saves the task a second
  // probe per changed entry and the serialising (issue 12: the pause at the barrier).
  // After a deferred take with unresolved groups, the returned groups are frozen instead
  // (thaw() before changing one, as for freeze_key_groups): each is resolved and serialised by
  // the writer's thread, or resolved and copied by the task when it changes the group first.
  virtual std::shared_ptr<state::FrozenKeyGroups>
  defer_key_group_deltas(const state::DeltaKeys& /*deltas*/) {
    return nullptr;
  }
  // Deferred snapshots ([checkpoint] snapshot = "deferred"; state/frozen_key_groups.hpp).
  // Called on the task thread at a barrier, between batches, instead of snapshot_key_group for
  // `groups` (of this subtask's range, sorted: those the checkpoint writes whole): freezes them
  // as they are now and returns what serialises each of them later into exactly the bytes
  // snapshot_key_group would append now. The snapshot writer's thread calls that while the task
  // goes on, so it must read only the group's own tables and configuration (what other groups
  // share, such as timers, is copied here), and the operator must call thaw() on the returned
  // object's group before anything changes that group after this call, and thaw_all() before
  // what sweeps many groups (KeyGroupFreezer does both). A later call thaws the groups of the
  // one before first. nullptr (the default): the operator defers nothing, and the runtime calls
  // snapshot_key_group now.
  virtual std::shared_ptr<state::FrozenKeyGroups> freeze_key_groups(const std::vector<std::uint32_t>& /*groups*/) {
    return nullptr;
  }
  // State that belongs to the subtask, not to a key group (a broadcast join's records);
  // appends nothing when there is none.
  virtual void snapshot_subtask_state(std::string& /*out*/) const {}
  // Called after open() and before any record: the segment a snapshot holds for a key group
  // in this subtask's range (written by whichever subtask owned it then). Once per group.
  virtual Result<void> restore_key_group(std::uint32_t /*key_group*/, std::string_view /*data*/) {
    return fail("this operator has no keyed state to restore");
  }
  // Parallel restore, in two steps: load_key_group decodes a group's segment into tables of
  // its own, and may run on several helper threads at once (so it must be const in fact:
  // read only configuration, touch no table, timer or FieldNames of the operator); install()
  // then hands what it built to the operator on the task thread, cheaply. Either step fails
  // as restore_key_group would. Dropping a load uninstalled frees what it built.
  class KeyGroupLoad {
  public:
    virtual ~KeyGroupLoad() = default;
    virtual Result<void> install() = 0;
  };
  // A group from its newest keyed segment (`data`; empty when the chain holds none: the group
  // was empty) and the keyed_delta segments written after it, oldest first. The same thread
  // rules as load_key_group; it never returns nullptr when `deltas` is not empty. The default
  // loads `data` and refuses deltas (an operator that writes none never finds one).
  virtual Result<std::unique_ptr<KeyGroupLoad>> load_key_group_with_deltas(
      std::uint32_t key_group, std::string_view data, const std::vector<std::string_view>& deltas) const {
    if (!deltas.empty()) return fail("this operator cannot apply a keyed_delta segment");
    return load_key_group(key_group, data);
  }
  // nullptr: this operator loads no group off the task thread; the runtime calls
  // restore_key_group on the task thread instead.
  virtual Result<std::unique_ptr<KeyGroupLoad>> load_key_group(std::uint32_t /*key_group*/,
                                                               std::string_view /*data*/) const {
    return std::unique_ptr<KeyGroupLoad>{};
  }
  // A rescale that keeps a worker (pipeline/runtime/kept_state.hpp): `donor` is the same
  // node's operator of the chain that worker ran before, opened for its old subtask, whose
  // state is exactly the checkpoint being restored. Moves `key_group` (in the donor's range
  // and in this one's) out of the donor into a load whose install() gives it to this operator
  // as if it had been read from that checkpoint, without copying or decoding its entries.
  // nullptr: this operator cannot take it (another type, or no support); the group is then
  // read from the checkpoint. Task thread only; the donor is destroyed after the restore.
  virtual std::unique_ptr<KeyGroupLoad> take_key_group_from(Operator& /*donor*/,
                                                            std::uint32_t /*key_group*/) const {
    return nullptr;
  }
  // Called after open(), before any record, with the subtask state of EVERY old subtask
  // (index = old subtask, empty when it wrote none): the operator takes what its new subtask
  // index (ctx.subtask of ctx.parallelism) should hold.
  virtual Result<void> restore_subtask_state(const std::vector<std::string_view>& /*old_subtasks*/) {
    return {};
  }

protected:
  OperatorContext ctx_;
};

enum class SourceStatus {
  Data, // appended records (maybe zero) and may have more right away
  Idle, // nothing now; poll again after waiting on readiness_fd() or a short sleep
  End,  // no more records, ever
};

class Source {
public:
  virtual ~Source() = default;
  virtual void open(OperatorContext& ctx) { ctx_ = ctx; }
  // Appends at most `max_records` records to `out`.
  virtual SourceStatus poll(state::Batch& out, std::size_t max_records) = 0;
  // A file descriptor that becomes readable when poll() would make progress, or -1.
  virtual int readiness_fd() const { return -1; }
  // With no readiness_fd(), how long the task may wait after poll() returned Idle before it
  // polls again (control messages and timers still wake it at once): a source that looks for
  // new input on a timer (a followed file) says when it looks next, rather than being polled
  // a thousand times a second.
  virtual std::chrono::milliseconds idle_wait() const { return std::chrono::milliseconds(1); }

  // Where each record of the last poll came from, in order, for bad-record messages of what
  // runs on them next (event time): the raw line and its 1-based number. Empty when the
  // source has no lines (the generator). `raw` points into memory the polled batch retains.
  struct RecordOrigin {
    std::string_view raw;
    std::uint64_t line = 0;
  };
  virtual std::span<const RecordOrigin> last_poll_origins() const { return {}; }

  // --- Rewinding (SPEC §7: every source is replayable). Called between polls. ---
  //
  // Where this subtask is: what it has emitted so far (file offsets and the files done,
  // generator sequence numbers), as self-describing bytes with a version byte first.
  virtual void snapshot_position(std::string& /*out*/) const {}
  // Called after open(), before the first poll, with the positions of EVERY old subtask
  // (index = old subtask): the source goes on from there, emitting exactly the records that
  // no old subtask had emitted and that belong to its new share (ctx.subtask of
  // ctx.parallelism), so that nothing is lost or repeated at any new parallelism.
  virtual Result<void> restore_position(const std::vector<std::string_view>& /*old_subtasks*/) {
    return fail("this source cannot rewind");
  }
  // The files in ctx.checkpoint_dir that the position last written by snapshot_position()
  // needs to restore (spool files), by name: the checkpoint records them, and the runtime
  // deletes a spool file once no retained checkpoint needs it. Called right after
  // snapshot_position().
  virtual std::vector<std::string> referenced_files() const { return {}; }
  // The same for a savepoint, which may be moved elsewhere and outlive the job's files: the
  // position must carry whatever it needs to replay (a spooled source: the spool bytes it has
  // not emitted), and referenced_files() afterwards names nothing. Sources that need no file
  // of their own to rewind write their usual position.
  virtual void snapshot_self_contained_position(std::string& out) const { snapshot_position(out); }
  // The run ends with a savepoint at the end of input (`run --savepoint-on-exit`), and the
  // next run goes on from it: input that may still be incomplete (a line being appended to a
  // file) is left for that run. Called before the first poll.
  virtual void ends_with_savepoint() {}

protected:
  OperatorContext ctx_;
};

class Sink {
public:
  virtual ~Sink() = default;
  virtual void open(OperatorContext& ctx) { ctx_ = ctx; }
  virtual void write(const state::Batch& in) = 0;
  // All input has ended: flush and make the output visible (rename part files).
  virtual void finish() = 0;
  // Called about once a second on the task's thread, also while nothing is written: a sink
  // whose output has gone for good throws then (stdout whose reader closed it: Error
  // OutputClosed), so that a job that has nothing more to write, a followed file's say, still
  // ends like `| head` rather than at its next record.
  virtual void check_output() {}
  // The job failed or this task is halted: discard the output in progress. Output prepared
  // for a checkpoint stays, since that checkpoint may have completed (a restore publishes it).
  virtual void abort() {}
  // The job was cancelled or restarts: the coordinator sends the COMMIT of every checkpoint that
  // completed before CANCEL, on the same ordered channel, and none completes after it, but for
  // a final checkpoint, whose output is published at RELEASE: a failure between its completion
  // and RELEASE cancels a job whose output for it is prepared, and which a restore (or
  // `restart`) from it publishes. So discard what is in progress and what was prepared for
  // checkpoints after `completed` (the newest the coordinator completed; 0: none), and keep
  // what was prepared for it and before.
  virtual void cancel(std::uint64_t /*completed*/) { abort(); }

  // --- Exactly-once output by two-phase commit (SPEC §6, §7). Called between writes. ---
  //
  // Checkpoint `checkpoint_id` covers everything written so far: make it durable but not yet
  // visible (close and fsync the part file in progress) and append to `out` what a restarted
  // sink needs to publish it (the names of the prepared files).
  virtual void pre_commit(std::uint64_t /*checkpoint_id*/, std::string& /*out*/) {}
  // The checkpoint completed (its _metadata is durable): publish what pre_commit prepared for
  // it and for every earlier checkpoint.
  virtual void commit(std::uint64_t /*checkpoint_id*/) {}
  // Called after open(), before any write, with the pre_commit state of EVERY old subtask from
  // the restored checkpoint: publish those (their checkpoint completed) if not yet published,
  // and discard any other output left in progress.
  virtual Result<void> restore_pending(const std::vector<std::string_view>& /*old_subtasks*/) {
    return {};
  }

protected:
  OperatorContext ctx_;
};

} // namespace streamctl::operators
