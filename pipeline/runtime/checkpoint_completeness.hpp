#pragma once
// Whether a checkpoint's _metadata describes every task of the plan that wrote it, exactly
// once (checkpoint_metadata.hpp). A task left out is not an empty task: a source subtask
// without its entry would read its input again from the start, a keyed one would lose its key
// groups; so an incomplete, duplicated or contradictory list refuses the whole snapshot.
//
// Tasks are grouped into chains by their `nodes` (the metadata says no more of the plan).

#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/runtime/checkpoint_metadata.hpp"
#include "state/error.hpp"

namespace streamctl::runtime {

// From the metadata alone: no file named twice; per chain one parallelism and every subtask
// 0..parallelism-1 exactly once; no node in two chains or twice in one; and, from version 2,
// as many chains as `chains` says. Messages begin with `file` (the _metadata path).
Result<void> check_chains_complete(const CheckpointMetadata& metadata, const std::string& file);

// From the task files' headers (`chain_ids[k]` is the chain id in the header of
// metadata.tasks[k]): one id per chain, another for each chain, and together 0..N-1 for N
// chains, so that a chain left out of the metadata whole is found too. Messages begin with
// `dir`.
Result<void> check_chain_ids(const CheckpointMetadata& metadata, const std::vector<std::uint32_t>& chain_ids,
                             const std::string& dir);

} // namespace streamctl::runtime
