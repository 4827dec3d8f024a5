#include "operators/filter.hpp"

#include <span>
#include <vector>

#include "operators/bad_record.hpp"
#include "operators/field_reads.hpp"
#include "operators/wall_clock.hpp"
#include "pipeline/spec/expression.hpp"

namespace streamctl::operators {

namespace {
class Filter final : public Operator {
public:
  explicit Filter(pipeline::Expression where) : where_(std::move(where)) { eval_.arena = &scratch_; }

  void process(const state::Batch& in, state::Batch& out) override {
    // Kept records are shared with the input batch, not copied.
    out.retain_memory_of(in);
    eval_.now_ms = wall_clock_ms(); // now() is the same for every record of a batch
    // The whole batch at once (faster than record by record); eval_batch stops at a record
    // that fails, which is reported, and the rest of the batch follows.
    const std::span<const state::Record> records(in.begin(), in.end());
    values_.resize(records.size());
    std::size_t at = 0;
    while (at < records.size()) {
      std::size_t done = where_.eval_batch(records.subspan(at), eval_, values_.data() + at);
      for (std::size_t end = at + done; at < end; ++at) {
        bool keep = false;
        if (!pipeline::Expression::as_predicate(values_[at], eval_, keep))
          report_bad_record(ctx_, records[at], eval_.error);
        else if (keep)
          out.add_shared(records[at]);
      }
      if (at < records.size()) report_bad_record(ctx_, records[at++], eval_.error);
    }
    scratch_.reset();
  }

private:
  pipeline::Expression where_;
  state::Arena scratch_{4096};
  pipeline::EvalContext eval_;
  std::vector<state::Value> values_; // the where expression of each record of the batch
};
} // namespace

namespace {

// Projection: what the filter's `where` reads, and what is read after it (records pass whole).
std::vector<pipeline::FieldSet> filter_reads(const pipeline::PipelineSpec&, const pipeline::NodeSpec& node,
                                             const pipeline::FieldSet& main, const pipeline::FieldSet&) {
  pipeline::FieldSet reads = main;
  add_expression_fields(reads, node.config.get("where"));
  return {reads};
}

} // namespace

pipeline::NodeTypeSchema filter_schema() {
  using pipeline::KeySchema;
  using pipeline::KeyType;
  pipeline::NodeTypeSchema schema{
      "filter", {KeySchema{"where", KeyType::Expression, true, {}, {}, "keep records where this is true"}}};
  schema.read_fields = filter_reads;
  return schema;
}

std::unique_ptr<Operator> make_filter(const pipeline::PipelineSpec&, const pipeline::NodeSpec& node,
                                      state::FieldNames& names) {
  return std::make_unique<Filter>(
      pipeline::Expression::compile(node.config["where"].value_or(std::string()), names));
}

} // namespace streamctl::operators
