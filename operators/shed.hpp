#pragma once
// `type = "shed"`: load shedding (SPEC §6). Drops each record with probability
// `drop_probability`: always, or, with `target_latency`, only while the pipeline lags more
// than that behind the wall clock, so that an overloaded job keeps up by giving up some
// records before its costly operators rather than falling ever further behind.
//
// Lag is measured as the wall clock minus this subtask's watermark (so it needs `event_time`
// on a source upstream; until latency markers exist this is the only measure). It is checked
// at every batch and every watermark: shedding starts with the first batch that arrives
// while the lag is above the target, and stops with the first that arrives below it.
//
// Which records are dropped is a pure function of `seed`, the subtask and the record's
// position in the subtask's input: a run at a given parallelism over the same input drops the
// same records, also across a restore from a checkpoint (the position is checkpointed). What
// was dropped is the node's records in minus records out, in `status` and the end-of-run
// summary.

#include "operators/registry.hpp"

namespace streamctl::operators {

pipeline::NodeTypeSchema shed_schema();
std::unique_ptr<Operator> make_shed(const pipeline::PipelineSpec&, const pipeline::NodeSpec&,
                                    state::FieldNames&);

} // namespace streamctl::operators
