#pragma once
// Drives one node of a pipeline directly, with no sockets and no processes: records in as
// JSON lines, records out as JSON lines, bad records collected instead of handled.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "operators/registry.hpp"
#include "pipeline/runtime/job_loader.hpp"
#include "state/json_reader.hpp"
#include "state/json_writer.hpp"

namespace streamctl::testing {

struct CollectedError {
  std::string raw;
  std::uint64_t line;
  std::string reason;
};

class CollectingErrors : public operators::RecordErrors {
public:
  void bad_record(std::string_view raw, std::uint64_t line, std::string_view reason) override {
    errors.push_back(CollectedError{std::string(raw), line, std::string(reason)});
  }
  std::uint64_t count() const override { return errors.size(); }
  std::vector<CollectedError> errors;
};

class Harness {
public:
  // `toml` is a whole pipeline file; nodes are taken from it by name.
  explicit Harness(const std::string& toml) {
    operators::register_builtin_types(registry_);
    job_ = std::make_unique<runtime::LoadedJob>(
        runtime::load_job_text(toml, "test.toml", std::filesystem::current_path(), {}, registry_));
  }

  const pipeline::NodeSpec& node(const std::string& name) const { return *job_->spec.find(name); }

  // Feeds `inputs` to operator `name` in batches of `batch_size`, then finishes it.
  std::vector<std::string> run_operator(const std::string& name, const std::vector<std::string>& inputs,
                                        std::size_t batch_size = 1024, int subtask = 0, int parallelism = 1) {
    auto op = registry_.make_operator(job_->spec, node(name), names_);
    auto ctx = context(name, subtask, parallelism);
    op->open(ctx);
    std::vector<std::string> out;
    for (std::size_t at = 0; at < inputs.size(); at += batch_size) {
      state::Batch in = parse(inputs, at, std::min(inputs.size(), at + batch_size));
      state::Batch result;
      op->process(in, result);
      append(result, out);
    }
    state::Batch rest;
    op->finish(rest);
    append(rest, out);
    return out;
  }

  // Polls source `name` until it ends (or `max_polls`), returning its records as JSON lines.
  std::vector<std::string> run_source(const std::string& name, int subtask = 0, int parallelism = 1,
                                      std::size_t batch_size = 1024, int max_polls = 1000000) {
    auto source = registry_.make_source(job_->spec, node(name), names_);
    auto ctx = context(name, subtask, parallelism);
    source->open(ctx);
    std::vector<std::string> out;
    for (int k = 0; k < max_polls; ++k) {
      state::Batch batch;
      auto status = source->poll(batch, batch_size);
      append(batch, out);
      if (status == operators::SourceStatus::End) break;
    }
    return out;
  }

  state::FieldNames& names() { return names_; }
  CollectingErrors errors;

  // Parses JSON lines into a batch. With `time_field`, each record whose field of that name is
  // an int is stamped with it as its event time (as a source's `event_time` would).
  state::Batch parse(const std::vector<std::string>& lines, std::size_t from, std::size_t to,
                     const std::string& time_field = "") {
    state::Batch batch;
    state::RecordBuilder builder;
    state::FieldId time_id = time_field.empty() ? state::FieldId{} : names_.intern(time_field);
    for (std::size_t k = from; k < to; ++k) {
      std::string_view text = batch.copy_string(lines[k]);
      builder.reset();
      auto parsed = state::parse_json_record(text, names_, batch, builder);
      if (!parsed) throw std::runtime_error("bad test input: " + lines[k] + ": " + parsed.error());
      builder.finish(batch);
      if (!time_field.empty()) {
        const state::Record& r = batch[batch.size() - 1];
        if (const state::Value* t = r.find(time_id); t && t->kind == state::Kind::Int)
          batch.set_timestamp(batch.size() - 1, t->i);
      }
    }
    return batch;
  }
  void append(const state::Batch& batch, std::vector<std::string>& out) {
    for (const auto& record : batch) {
      std::string line;
      state::append_json(record, names_, line);
      out.push_back(line);
    }
  }
  operators::Registry& registry() { return registry_; }
  const runtime::LoadedJob& job() const { return *job_; }

  operators::OperatorContext context(const std::string& name, int subtask, int parallelism) {
    operators::OperatorContext ctx;
    ctx.pipeline = &job_->spec;
    ctx.node = &node(name);
    ctx.subtask = subtask;
    ctx.parallelism = parallelism;
    ctx.names = &names_;
    ctx.errors = &errors;
    return ctx;
  }

private:

  operators::Registry registry_;
  std::unique_ptr<runtime::LoadedJob> job_;
  state::FieldNames names_;
};

// Drives one operator step by step, as a worker would: batches of records (stamped with event
// time from a field), on any input, watermarks, processing time, and the end of input. What it
// emits collects in `out`, late records in `late` (when `collect_late`), both as JSON lines.
//
//   OperatorRun run(h, "op");
//   run.records({R"({"ts": 5, "user": "a"})"});
//   run.watermark(60000);
//   run.finish();
//   CHECK(run.out == ...);
class OperatorRun {
public:
  OperatorRun(Harness& harness, const std::string& name, int subtask = 0, int parallelism = 1,
              bool collect_late = true)
      : harness_(harness), ctx_(harness.context(name, subtask, parallelism)) {
    op_ = harness.registry().make_operator(harness.job().spec, harness.node(name), harness.names());
    if (collect_late) ctx_.late_output = &late_batch_;
    ctx_.now_ms = [this] { return now_; };
    op_->open(ctx_);
  }

  // Feeds `lines` in batches of `batch_size` to input `input`, stamped from `time_field`.
  void records(const std::vector<std::string>& lines, int input = 0, std::size_t batch_size = 1024,
               const std::string& time_field = "ts") {
    for (std::size_t at = 0; at < lines.size(); at += batch_size) {
      state::Batch in = harness_.parse(lines, at, std::min(lines.size(), at + batch_size), time_field);
      state::Batch result;
      op_->process_input(input, in, result);
      collect(result);
    }
  }
  // Feeds a batch made elsewhere (stamped already) to input `input`.
  void batch(const state::Batch& in, int input = 0) {
    state::Batch result;
    op_->process_input(input, in, result);
    collect(result);
  }
  void watermark(std::int64_t w) {
    state::Batch result;
    op_->on_watermark(w, result);
    collect(result);
  }
  // Sets the processing-time clock and tells the operator.
  void processing_time(std::int64_t now) {
    now_ = now;
    state::Batch result;
    op_->on_processing_time(now, result);
    collect(result);
  }
  void set_clock(std::int64_t now) { now_ = now; }
  std::int64_t clock() const { return now_; }
  // End of input: the watermark goes to +infinity, then finish(), as the task chain does.
  void finish() {
    watermark(INT64_MAX);
    state::Batch result;
    op_->finish(result);
    collect(result);
  }

  // The operator itself, for what a test asks of it beyond records (snapshots, freezes).
  operators::Operator& op() { return *op_; }

  // Every key group's snapshot bytes, empty for a group without state, as a checkpoint takes them.
  std::map<std::uint32_t, std::string> snapshot_key_groups(std::uint32_t max_parallelism) const {
    std::map<std::uint32_t, std::string> groups;
    for (std::uint32_t g = 0; g < max_parallelism; ++g) op_->snapshot_key_group(g, groups[g]);
    return groups;
  }
  std::string snapshot_subtask() const {
    std::string bytes;
    op_->snapshot_subtask_state(bytes);
    return bytes;
  }
  // Restores what the two above took (empty groups are not restored, as a snapshot has no
  // segment for them); false when the operator refuses any of it.
  bool restore(const std::map<std::uint32_t, std::string>& groups, const std::string& subtask) {
    for (const auto& [g, bytes] : groups)
      if (!bytes.empty() && !op_->restore_key_group(g, bytes)) return false;
    return static_cast<bool>(op_->restore_subtask_state({subtask}));
  }

  std::vector<std::string> out;
  std::vector<std::string> late;

private:
  void collect(const state::Batch& result) {
    harness_.append(result, out);
    harness_.append(late_batch_, late);
    late_batch_.clear();
  }

  Harness& harness_;
  operators::OperatorContext ctx_;
  std::unique_ptr<operators::Operator> op_;
  state::Batch late_batch_;
  std::int64_t now_ = 0;
};

// A pipeline around one operator: source `in` (stdin) -> the operator `op` -> sink `out`.
inline std::string single_operator_pipeline(const std::string& operator_body) {
  return "name = \"t\"\n[sources.in]\ntype = \"stdin\"\n[operators.op]\ninputs = [\"in\"]\n" + operator_body +
         "\n[sinks.out]\ntype = \"stdout\"\ninputs = [\"op\"]\n";
}

} // namespace streamctl::testing
