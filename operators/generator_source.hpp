#pragma once
// `type = "generator"`: deterministic synthetic records (SPEC §6).
//
//   profile = "counter": {"seq": N, "ts": start_time + N * interval}
//   profile = "clicks":  {"ts", "user", "page", "status", "bytes"}, each a pure function of
//                        (seed, N), like the benchmark's click logs
//   profile = "nexmark": the Nexmark person/auction/bid events (operators/nexmark.hpp);
//                        `events` keeps one kind, numbered as in the full stream
//
// Record N is made by subtask N mod parallelism, so the multiset of records does not depend
// on the parallelism. `count` bounds the source (absent: unbounded); `rate` caps records per
// second for the whole source.

#include "operators/registry.hpp"

namespace streamctl::operators {

pipeline::NodeTypeSchema generator_source_schema();
std::unique_ptr<Source> make_generator_source(const pipeline::PipelineSpec&, const pipeline::NodeSpec&,
                                              state::FieldNames&);

} // namespace streamctl::operators
