#!/usr/bin/env bash
# Under [cluster] launcher = "slurm": scancel of the allocation mid-run fails the job (exit 1)
# with Slurm's word for it (salloc: the allocation revoked) and streamctl's (the job failed,
# the worker named; with [restart], every node named as lost), and leaves nothing running on
# any node nor any job in the queue. kill -9 of the coordinator leaves nothing running either;
# an allocation too small for the job is refused (exit 2) before anything starts.
source "$SOURCE_DIR/tests/e2e/lib/common.bash"
source "$SOURCE_DIR/tests/hosts/lib/hosts.bash"
source "$SOURCE_DIR/tests/hosts/lib/slurm.bash"
hosts_require
slurm_require
hosts_up 3
slurm_up

pipeline() { # $1: parallelism
  cat <<TOML
name = "slurm-long"
parallelism = $1
[cluster]
launcher = "slurm"
[sources.gen]
type = "generator"
profile = "counter"
count = 100000000
rate = 2000
event_time = "ts"
[operators.keyed]
type = "map"
inputs = ["gen"]
set = { k = "seq % 37" }
[operators.count_per_key]
type = "window"
inputs = ["keyed"]
key = ["k"]
window = { kind = "tumbling", size = "250ms" }
aggregates = { n = "count()", s = "sum(seq)" }
[sinks.out]
type = "file"
inputs = ["count_per_key"]
path = "$WORK/long-out"
TOML
}
pipeline 3 >"$WORK/long.toml"

salloc -N 3 "$STREAMCTL" run -v "$WORK/long.toml" >"$WORK/long.out" 2>"$WORK/long.err" &
job_pid=$!
wait_for_text "$WORK/long.err" "records flowing" 60
allocation=$(squeue -h -o %i)
[[ "$allocation" =~ ^[0-9]+$ ]] || fail "expected one allocation in the queue, got [$allocation]"
scancel "$allocation"
set +e
wait "$job_pid"
code=$?
set -e
cat "$WORK/long.err"
assert_eq 1 "$code" "exit code of the job whose allocation was cancelled"
assert_contains "$WORK/long.err" "has been revoked"
assert_contains "$WORK/long.err" "failed: worker for gen -> keyed"
for host in h1 h2 h3; do slurm_wait_only_daemons "$host" 10 || fail "processes left on $host"; done
slurm_wait_queue_empty 15 || fail "jobs left in the queue"
assert_no_processes_left

# With restarts the job tries the allocation's nodes again, finds none (the allocation is
# gone) and fails naming them.
{ cat "$WORK/long.toml"; printf '[restart]\nstrategy = "fixed"\ndelay = "50ms"\nmax_attempts = 3\n'; } >"$WORK/restarting.toml"
salloc -N 3 "$STREAMCTL" run -v "$WORK/restarting.toml" >"$WORK/restarting.out" 2>"$WORK/restarting.err" &
job_pid=$!
wait_for_text "$WORK/restarting.err" "records flowing" 60
allocation=$(squeue -h -o %i)
[[ "$allocation" =~ ^[0-9]+$ ]] || fail "expected one allocation in the queue, got [$allocation]"
scancel "$allocation"
set +e
wait "$job_pid"
code=$?
set -e
assert_eq 1 "$code" "exit code of the restarting job whose allocation was cancelled"
assert_contains "$WORK/restarting.err" "no host is left to restart the job on"
for host in h1 h2 h3; do assert_contains "$WORK/restarting.err" "node '$host': the probe step exited"; done
for host in h1 h2 h3; do slurm_wait_only_daemons "$host" 10 || fail "processes left on $host"; done
slurm_wait_queue_empty 15 || fail "jobs left in the queue"
assert_no_processes_left

# kill -9 of the coordinator: its sruns die with it (PR_SET_PDEATHSIG), slurmd ends their
# steps' tasks, salloc's command has ended so the allocation goes.
salloc -N 3 "$STREAMCTL" run -v "$WORK/long.toml" >"$WORK/kill.out" 2>"$WORK/kill.err" &
salloc_pid=$!
wait_for_text "$WORK/kill.err" "records flowing" 60
coordinator=$(pgrep -P "$salloc_pid" -f "run -v $WORK/long.toml")
[[ -n "$coordinator" ]] || fail "no coordinator under salloc"
kill -9 "$coordinator"
set +e
wait "$salloc_pid"
set -e
for host in h1 h2 h3; do slurm_wait_only_daemons "$host" 15 || fail "processes left on $host after kill -9 of the coordinator"; done
slurm_wait_queue_empty 15 || fail "jobs left in the queue after kill -9 of the coordinator"
assert_no_processes_left

# One node of 2 slots cannot take 4 spread chains: refused before any worker starts.
pipeline 4 >"$WORK/wide.toml"
run_expect 2 salloc -N 1 "$STREAMCTL" run "$WORK/wide.toml"
assert_contains "$WORK/err" "cannot place the job"
for host in h1 h2 h3; do slurm_wait_only_daemons "$host" 10 || fail "processes left on $host"; done
assert_no_processes_left
echo "slurm_scancel: ok"
