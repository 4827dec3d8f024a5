#pragma once
// `type = "dedup"` (SPEC §6): drops a record when a record with the same key was kept less
// than `within` before it, and passes every other record on unchanged, in input order.
//
// Time: a record's event time when it has one, else processing time (ctx.now_ms()).
// Out-of-order records: a record is a duplicate when |t - kept| < within, where `kept` is the
// time of the key's reference record, the latest record of the key that was kept; a record
// earlier than the reference but less than `within` from it is dropped too. A kept record
// that is `within` or more *before* the reference (very late input) does not move the
// reference back. A missing key field counts as null, a key like any other.
//
// `method = "exact"`: keyed state, one 8-byte time per key (state::KeyedMap, by key group) and
// one timer per key at kept + within (state::TimerService; event time or processing time like
// the record) that forgets the key when it fires, unless a newer record replaced the reference.
// A record that arrives behind the watermark after its key was forgotten is kept.
//
// `method = "bloom"`: bounded memory, approximate (operators/bloom_filter.hpp): per key group,
// Bloom filters over time generations of length `within`; a key is a duplicate when the filter
// of its generation or of a neighbouring held generation has it, so the horizon is between
// `within` and 2 × within, and false positives drop about `false_positive_rate` of the records
// that are not duplicates.

#include "operators/registry.hpp"

namespace streamctl::operators {

pipeline::NodeTypeSchema dedup_schema();
std::unique_ptr<Operator> make_dedup(const pipeline::PipelineSpec&, const pipeline::NodeSpec&,
                                     state::FieldNames&);

} // namespace streamctl::operators
