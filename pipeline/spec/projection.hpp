#pragma once
// Projection pushdown: for every edge and every source, the set of top-level fields that
// anything downstream reads, so that sources make only those and edges between processes carry
// only those (a keyed count of `user` sends one field, not the five a click has).
//
// It works backwards from the sinks. A node's type says, through its schema's read_fields,
// which fields of each input it reads given what its consumers read of its outputs: a filter
// reads its `where` and passes on what is needed after it; a window reads its key and its
// aggregates' arguments (and, for its late output, whatever that output's consumers read); a
// join reads its keys and what its `select` reads of each side (without `select`, what its
// consumers read, from both sides); a sink and any type without read_fields read everything. A node whose on_error is
// "fail" or "dead_letter" reads everything, so that the record it reports is the record it got.
// A source emits what its consumers read plus what its own `event_time` reads.
//
// Off with the top-level `projection = false` (then every set is "everything"), which the
// tests use to show that projection never changes a job's output.

#include "pipeline/spec/pipeline_spec.hpp"
#include "pipeline/spec/validation.hpp"

namespace streamctl::pipeline {

// Fills spec.input_fields and spec.source_fields for a validated spec.
void plan_projection(PipelineSpec& spec, const SchemaCatalog& catalog);

// The top-level field names an expression reads; everything when it does not compile.
FieldSet fields_of_expression(std::string_view text);

} // namespace streamctl::pipeline
