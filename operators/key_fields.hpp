#pragma once
// The `key = [...]` of a keyed node: which fields form a record's key, their canonical bytes
// (state/key_codec.hpp) for hashing and state, and the key fields of output rows.

#include <string>
#include <vector>

#include "pipeline/spec/pipeline_spec.hpp"
#include "state/batch.hpp"

namespace streamctl::operators {

class KeyFields {
public:
  // Throws Error(Usage) when `key` is empty.
  static KeyFields from_node(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node,
                             state::FieldNames& names);
  // Whether the node is keyed at all (has a `key`).
  static bool is_keyed(const pipeline::NodeSpec& node);

  // The key's canonical bytes; a missing field counts as null.
  void encode(const state::Record& record, const state::FieldNames& names, std::string& out);
  // Appends the key fields, as the record has them (null when missing), to `builder`.
  void append_fields(const state::Record& record, state::RecordBuilder& builder) const;

private:
  std::vector<state::FieldId> fields_;
  std::vector<state::Value> values_; // scratch
};

} // namespace streamctl::operators
