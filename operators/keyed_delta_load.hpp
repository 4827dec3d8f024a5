#pragma once
// Operator::load_key_group_with_deltas for an operator that writes keyed_delta segments (the
// aligned windows, reduce): the group's newest keyed segment decoded, then each delta written
// after it applied in turn, in one GroupLoad of the operator's. The operator befriends
// KeyedDeltaLoad and has:
//   GroupLoad(Op&, key_group)                 an empty group (its keyed segment was empty)
//   load_group(key_group, data)               -> Result<std::unique_ptr<GroupLoad>>
//   apply_delta(GroupLoad&, delta)            -> Result<void>; on a failure the load is dropped
//   restore_failure(key_group, why)           -> Failure
// Thread rules as load_key_group's: the operator is only read.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "operators/operator.hpp"

namespace streamctl::operators {

struct KeyedDeltaLoad {
  // `key_group` must be one of the operator's (the caller checks).
  template <typename Op>
  static Result<std::unique_ptr<Operator::KeyGroupLoad>> load(const Op& op, std::uint32_t key_group,
                                                              std::string_view data,
                                                              const std::vector<std::string_view>& deltas) {
    using GroupLoad = typename Op::GroupLoad;
    std::unique_ptr<GroupLoad> load;
    if (data.empty()) {
      load = std::make_unique<GroupLoad>(const_cast<Op&>(op), key_group);
    } else {
      auto full = op.load_group(key_group, data);
      if (!full) return Failure{full.error()};
      load = std::move(*full);
    }
    for (std::size_t k = 0; k < deltas.size(); ++k)
      if (auto ok = op.apply_delta(*load, deltas[k]); !ok)
        return op.restore_failure(key_group, "delta " + std::to_string(k + 1) + " of " +
                                                 std::to_string(deltas.size()) + ": " + ok.error());
    return std::unique_ptr<Operator::KeyGroupLoad>(std::move(load));
  }
};

} // namespace streamctl::operators
