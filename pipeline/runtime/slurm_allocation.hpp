#pragma once
// A Slurm allocation that `streamctl run` makes itself when [cluster] launcher = "slurm" and
// the coordinator runs outside one (no SLURM_JOB_ID in its environment), held for the job's
// life and released when it ends (SPEC §9):
//
//   salloc [--nodes=N | --ntasks=T] [slurm_options...] -- /bin/sh -c
//       'printf "%s %s %s\n" "$SLURM_JOB_ID" "$SLURM_JOB_NODELIST" "$SLURM_JOB_CPUS_PER_NODE";
//        exec cat >/dev/null'
//
// salloc runs its command here (the login node) once the allocation is granted; the command
// prints the allocation on one line, which the coordinator reads from salloc's stdout, then
// holds the allocation by reading salloc's stdin, a pipe the coordinator keeps open. The slurm
// launcher then uses that job id and node list as it would the environment's (srun --jobid=J).
//
// Why the allocation cannot outlive the coordinator:
// - release() (the destructor: job end, error, signal) closes the pipe, runs `scancel J`, and
//   waits for salloc, which has relinquished the allocation by then.
// - kill -9 of the coordinator closes the pipe too: `cat` reads EOF and ends, and salloc, whose
//   command has ended, relinquishes the allocation. PR_SET_PDEATHSIG (SIGHUP) on salloc is the
//   second line: salloc relinquishes on SIGHUP (a granted salloc ignores SIGTERM).
// salloc keeps no descriptor of the coordinator's but its three pipes (close_range): a lock
// or pipe it inherited would outlive the coordinator with it.
// salloc runs in a process group of its own, so that a Ctrl-C at the terminal reaches the
// coordinator only (which then ends the job and releases the allocation in order).
//
// Threading: the coordinator's thread only; the thread that constructs must be the one that
// lives as long as the coordinator (PR_SET_PDEATHSIG fires when the forking thread ends).

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

#include "pipeline/spec/pipeline_spec.hpp"
#include "pipeline/spec/plan.hpp"
#include "state/error.hpp"

namespace streamctl::runtime {

struct SlurmAllocationRequest {
  std::optional<int> nodes;         // [cluster] nodes: --nodes=N; absent: --ntasks=ntasks
  int ntasks = 1;                   // the job's tasks that run on the nodes
  std::vector<std::string> options; // [cluster] slurm_options, after ours (so they win)
  std::string salloc_program = "salloc";
  std::string scancel_program = "scancel";
  std::chrono::seconds timeout{60};             // for the allocation to be granted
  std::function<void(const std::string&)> note; // info-level log lines; may be empty
};

// What the command prints once the allocation is granted.
struct AllocationLine {
  std::string job_id;        // "42"
  std::string nodelist;      // "h[1-3]"
  std::string cpus_per_node; // "2(x3)"; may be empty
};

// "42 h[1-3] 2(x3)" (the third field may be missing). Fails naming the line when a job id
// (digits) or a node list is missing.
Result<AllocationLine> parse_allocation_line(std::string_view line);

// salloc's argv, salloc first.
std::vector<std::string> salloc_command(const SlurmAllocationRequest& request);

// The tasks of `plan` that take a slot on a node: those placement does not keep on the
// coordinator's host (a stdout sink, a file source that is not shared). All of them when a
// node pins itself to a host (placement knows the nodes only once they are allocated).
int tasks_on_nodes(const pipeline::PipelineSpec& spec, const pipeline::PhysicalPlan& plan);

class SlurmAllocation {
public:
  // Runs salloc and waits for the allocation. Throws Error(Usage) with salloc's own words when
  // salloc is missing, fails (no such partition, not enough nodes, no slurmctld) or grants
  // nothing within request.timeout (its pending request is then cancelled).
  explicit SlurmAllocation(SlurmAllocationRequest request);
  ~SlurmAllocation(); // release()
  SlurmAllocation(const SlurmAllocation&) = delete;
  SlurmAllocation& operator=(const SlurmAllocation&) = delete;

  const AllocationLine& allocation() const { return line_; }
  pid_t salloc_pid() const { return pid_; }

  // Ends the allocation and reaps salloc; a second call does nothing. Never throws.
  void release();

private:
  [[noreturn]] void fail(const std::string& what);
  std::string drain_stderr();
  // Waits for salloc up to `bound`; false when it still runs.
  bool wait_for_salloc(std::chrono::milliseconds bound);

  SlurmAllocationRequest request_;
  AllocationLine line_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  int holder_ = -1; // write end of salloc's stdin: open = allocation held
  int out_ = -1;    // salloc's stdout
  int err_ = -1;    // salloc's stderr
  std::string stderr_text_;
};

} // namespace streamctl::runtime
