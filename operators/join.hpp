#pragma once
// `type = "join"`: an inner join of two inputs (input 0 is the left, input 1 the right) on
// `on = { left = "expr", right = "expr" }` (SPEC §6), in one of two forms:
//
//   window join    `window = { kind = "tumbling" | "sliding", size, slide }`: the records of
//                  both sides are held per key and window ([start, end), aligned to the epoch);
//                  when the watermark reaches the window's end, every left x right pair of the
//                  key is emitted with event time end - 1, and the window is dropped. A record
//                  late for every window it belongs to (end <= watermark) is a bad record.
//   interval join  `interval = { lower = "-5s", upper = "5s" }`: a left record at tl joins
//                  every right record of its key at tr with tl + lower <= tr <= tl + upper,
//                  as soon as the second of the two arrives, with event time max(tl, tr). A left
//                  record is dropped once the watermark reaches tl + upper, a right one at
//                  tr - lower: no record that could still match them can arrive. A record at or
//                  below the watermark when it arrives is late: a bad record, never joined.
//
// Keys: each side's expression, encoded as PartitionKey does (the data plane routes a hash
// join's inputs by the same bytes). Like SQL's NULL = NULL, a null key (or a missing field)
// matches nothing: such a record is dropped silently. A key expression that fails (a type
// error) makes the record a bad record.
//
// Time: a record without event time (state::kNoTimestamp) uses the processing time it arrives
// at; its windows fire and its interval state expires by processing-time timers, and what it
// produces carries no event time. At the end of input everything fires and all state goes.
//
// State lives per key group (KeyedMap and TimerService over the subtask's key groups; with
// `strategy = "broadcast"`, over all of them, since every subtask sees all right records and
// any left key), each entry holding one RecordBuffer (join_buffer.hpp) per side.

#include <cstddef>
#include <optional>

#include "operators/registry.hpp"

namespace streamctl::operators {

pipeline::NodeTypeSchema join_schema();
std::unique_ptr<Operator> make_join(const pipeline::PipelineSpec&, const pipeline::NodeSpec&,
                                    state::FieldNames&);

// What one join subtask holds, for tests and metrics.
struct JoinStateSize {
  std::size_t entries = 0; // (key, window) or key entries
  std::size_t records = 0; // stored records, both sides
  std::size_t timers = 0;  // pending timers, both time domains
  std::size_t memory_bytes = 0;
};
// nullopt when `op` is not a join.
std::optional<JoinStateSize> join_state_size(const Operator& op);

} // namespace streamctl::operators
