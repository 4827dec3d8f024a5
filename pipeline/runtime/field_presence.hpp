#pragma once
// Field presence at run time (issue 10: silent data mistakes). A field that a node reads in an
// expression, a key or an aggregate, and that none of its input records has, reads as null:
// a filter on a misspelt field drops everything, a key on one puts every record under one key,
// and the job still ends with exit 0. The static lint (pipeline/spec/lint.hpp) sees this only
// for sources whose fields are known (a generator profile); this looks at the records.
//
// Cheap by construction: each operator subtask looks at the first kFieldPresenceRecords records
// of each input only, marking in a bitmask which of the top-level fields it reads they had;
// after that, observe() is one comparison. A nested path counts by its top-level name.
//
// The worker sends its chain's reports in FINISHED ("unseen_fields"); the coordinator joins
// every subtask's and warns, at the end of the run, of a field that no subtask saw in a node
// that read at least one record:
//
//   pipeline.toml:7:1: filter 'ok' reads field 'usr', which none of the first 1024 records it
//   read had (did you mean 'user'?)

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "operators/registry.hpp"
#include "pipeline/spec/pipeline_spec.hpp"
#include "state/batch.hpp"

namespace streamctl::runtime {

// Records of each input that each operator subtask looks at.
inline constexpr std::uint64_t kFieldPresenceRecords = 1024;

// What one operator subtask found of one of its inputs.
struct FieldPresenceReport {
  std::string node;
  std::uint32_t input = 0;         // the node's input number (a join has two)
  std::uint64_t checked = 0;       // records looked at: at most kFieldPresenceRecords
  std::vector<std::string> unseen; // read fields that none of them had
  std::vector<std::string> had;    // fields they had, for "did you mean"; only with `unseen`
  bool operator==(const FieldPresenceReport&) const = default;
};

// The watch over one task chain's operators. Threading: the task thread only.
class FieldPresence {
public:
  FieldPresence() = default;
  // Watches every operator of `chain_nodes` (indices into spec.nodes, in chain order) whose
  // type says which fields it reads (NodeTypeSchema::read_fields); `names` must outlive this.
  FieldPresence(const pipeline::PipelineSpec& spec, const std::vector<std::size_t>& chain_nodes,
                const operators::Registry& registry, state::FieldNames& names);

  // The chain's operator number `op` (0: the first operator) reads `batch` on `input`.
  void observe(std::size_t op, int input, const state::Batch& batch) {
    if (op < watches_.size() && static_cast<std::size_t>(input) < watches_[op].size() &&
        watches_[op][static_cast<std::size_t>(input)].looked < kFieldPresenceRecords)
      look_at(watches_[op][static_cast<std::size_t>(input)], batch);
  }

  // One report per watched input that read at least one record.
  std::vector<FieldPresenceReport> reports() const;

private:
  static constexpr state::FieldId kNoPartials = ~state::FieldId{0};
  struct Watch {
    std::size_t node = 0;               // index into spec.nodes
    std::vector<state::FieldId> fields; // read; at most 64 (one bit each)
    std::vector<std::uint8_t> bit_of;   // by FieldId: bit + 1, 0 when not read
    std::uint64_t seen = 0;             // bit k: some record had fields[k]
    std::uint64_t checked = 0;          // records looked at, partial aggregates left out
    std::uint64_t looked = 0;           // records looked at, partial aggregates counted
    // A window fed partial aggregates (PipelineSpec::combines_into) reads none of its fields
    // in those: a record with this field is passed over. kNoPartials otherwise.
    state::FieldId partial_key = kNoPartials;
    std::vector<bool> had; // by FieldId: some record had it
  };
  static void look_at(Watch& w, const state::Batch& batch);

  const pipeline::PipelineSpec* spec_ = nullptr;
  const state::FieldNames* names_ = nullptr;
  std::vector<std::vector<Watch>> watches_; // by operator, then input; no fields: not watched
};

// The FINISHED message's "unseen_fields" value and back: one line per report,
// "node\tinput\tchecked\tunseen,...\thad,...", each name %-escaped ('%', tab, newline, ',').
// decode skips lines it cannot read (an older or newer worker says nothing then).
std::string encode_field_presence(const std::vector<FieldPresenceReport>& reports);
std::vector<FieldPresenceReport> decode_field_presence(std::string_view text);

// The warnings, one per node, input and field, in node order, from every subtask's reports
// (a field counts as seen when any subtask that read a record saw it), at the node table's
// position. Beside describe_silent_drops (job_status.hpp), for the end of a run.
std::vector<std::string> describe_unseen_fields(const pipeline::PipelineSpec& spec,
                                                const std::vector<FieldPresenceReport>& reports);

// While the job runs, the reports that can be trusted yet: those of a node and input whose
// subtasks have looked at kFieldPresenceRecords records in all. A field missing from fewer
// may still come (`status` then says nothing rather than something wrong).
std::vector<FieldPresenceReport> settled_reports(const std::vector<FieldPresenceReport>& reports);

} // namespace streamctl::runtime
