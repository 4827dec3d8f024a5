#pragma once
// The operator model: what sources, operators and sinks see of the job.
//
// Everything here works on batches, never on single records, and sees no sockets and no
// processes: the worker's task loop (pipeline/runtime) moves batches between a fused chain of
// these objects and the data plane, and a unit test can drive them directly
// (tests/unit/operators/harness.hpp).
//
// Threading: every method is called from the one task thread that owns the object.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "operators/wall_clock.hpp"
#include "pipeline/spec/pipeline_spec.hpp"
#include "state/batch.hpp"
#include "state/field_names.hpp"

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
  // The job failed or was cancelled: discard what is not committed.
  virtual void abort() {}

protected:
  OperatorContext ctx_;
};

} // namespace streamctl::operators
