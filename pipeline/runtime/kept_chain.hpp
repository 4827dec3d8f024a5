#pragma once
// A worker process that a rescale keeps (issue 12, fast rescale): what it carries from the task
// it ran before to the task it runs next, so that the key groups both own stay in memory rather
// than being written, read back and rebuilt.
//
// The protocol, between the coordinator (worker_pool.hpp, worker_reuse.hpp) and the worker:
//   1. The rescale's checkpoint stops the job (its barrier says so: transport/frame.hpp). A
//      task that has taken its snapshot of it fires no more processing-time timers, so its
//      operators hold exactly that checkpoint's state until something else reaches them.
//   2. Once the checkpoint is complete, the coordinator sends HALT with park=1 to the workers it
//      keeps, and HALT to the others. A parked worker closes its sockets and its sources and
//      sinks (as a halted one does) but keeps its chain's operators: the KeptChain.
//   3. REASSIGN (task, attempt, restore) tells a parked worker which task of the new plan it
//      runs. It starts that task as a new worker would, under the new task's identity, and
//      restores it from the checkpoint, except for the key groups that its old chain's
//      operators of the same nodes hold: those move over (Operator::take_key_group_from).
//      The old chain then goes, with what it held for groups that moved to other subtasks.
//   4. The kept state is used only when it is that of the checkpoint restored: the same
//      checkpoint id and directory, and nothing pushed into the chain since its snapshot.
//      Otherwise the task restores everything from the files, as a new worker does.
//
// Not thread-safe: the worker's task thread only.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>

#include "operators/registry.hpp"
#include "pipeline/runtime/job_loader.hpp"
#include "pipeline/runtime/record_tap.hpp"
#include "pipeline/runtime/task_chain.hpp"
#include "state/field_names.hpp"

namespace streamctl::runtime {

struct KeptChain {
  // The operators' state names fields by these ids: the next task's chain uses the same table.
  std::unique_ptr<state::FieldNames> names;
  // What the old chain points into, kept alive with it.
  std::unique_ptr<operators::Registry> registry;
  std::unique_ptr<LoadedJob> job;
  std::unique_ptr<RecordTap> tap;
  std::unique_ptr<TaskChain> chain;
  // The checkpoint whose state the chain's operators hold, exactly; none: they may hold more.
  std::optional<std::uint64_t> checkpoint_id;
  std::filesystem::path checkpoint_dir;

  // Whether the operators' state is that of the checkpoint in `dir` with id `id`.
  bool holds(std::uint64_t id, const std::filesystem::path& dir) const {
    if (!chain || !checkpoint_id || *checkpoint_id != id) return false;
    std::error_code ec;
    return std::filesystem::equivalent(dir, checkpoint_dir, ec) && !ec;
  }
};

// What REASSIGN says: the task of the new plan a parked worker runs next.
struct Reassignment {
  int task = 0;
  int attempt = 0;
  std::filesystem::path restore;
};

} // namespace streamctl::runtime
