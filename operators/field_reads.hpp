#pragma once
// Helpers for the read_fields functions of node types (pipeline/spec/projection.hpp): the
// fields that a node's `key`, `aggregates` and similar settings read. Each adds
// FieldSet::everything() when it cannot tell (a setting that does not compile: validation
// reports it).

#include "pipeline/spec/field_set.hpp"
#include "pipeline/spec/pipeline_spec.hpp"

namespace streamctl::operators {

// The fields the entries of `key = [...]` read (each entry is an expression).
void add_key_fields(pipeline::FieldSet& out, const pipeline::NodeSpec& node);
// The fields the arguments of `aggregates = { name = "fn(args)" }` read.
void add_aggregate_fields(pipeline::FieldSet& out, const pipeline::NodeSpec& node);
// The fields an expression-valued setting reads (absent: none).
void add_expression_fields(pipeline::FieldSet& out, const toml::node* setting);

} // namespace streamctl::operators
