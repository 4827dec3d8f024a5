#!/usr/bin/env bash
# The keyed window job of keyed_across_hosts.sh under [cluster] launcher = "slurm", on a real
# Slurm (slurmctld here, one slurmd per namespace host): run in `salloc -N 3`, and in a user's
# own sbatch script, it gives exactly the output of the job on one host, its workers spread
# over the allocation's nodes, and leaves nothing running on any node nor any job in the
# queue. Without an allocation, run makes one (slurm_allocate.sh); a request salloc refuses
# refuses the job (exit 2).
source "$SOURCE_DIR/tests/e2e/lib/common.bash"
source "$SOURCE_DIR/tests/hosts/lib/hosts.bash"
source "$SOURCE_DIR/tests/hosts/lib/slurm.bash"
hosts_require
slurm_require
hosts_up 3
slurm_up

python3 - >"$WORK/events.jsonl" <<'PY'
import random
random.seed(8)
for i in range(60000):
    print('{"ts": %d, "k": "key-%d", "v": %d}' % (i * 3, random.randrange(200), random.randrange(1000)))
PY

pipeline() { # $1: extra top-level text ([cluster])
  cat <<TOML
name = "slurm-keyed"
parallelism = 3
$1
[sources.in]
type = "file"
path = "$WORK/events.jsonl"
shared = true
event_time = "ts"
[operators.per_key]
type = "window"
inputs = ["in"]
key = ["k"]
window = { kind = "tumbling", size = "5s" }
aggregates = { n = "count()", total = "sum(v)" }
[sinks.out]
type = "stdout"
inputs = ["per_key"]
TOML
}
pipeline "" >"$WORK/local.toml"
pipeline "[cluster]
launcher = \"slurm\"" >"$WORK/slurm.toml"

"$STREAMCTL" run "$WORK/local.toml" >"$WORK/local.out" 2>"$WORK/local.err" || fail "the job on one host failed: $(tail -3 "$WORK/local.err")"
[[ -s "$WORK/local.out" ]] || fail "the job on one host wrote nothing"

# No allocation: run makes one itself (slurm_allocate.sh runs jobs in it); when salloc refuses
# the request, the job is refused before anything starts, in salloc's words.
run_expect 2 env -u SLURM_JOB_ID -u SLURM_JOB_NODELIST "$STREAMCTL" run \
  --set 'cluster.slurm_options=["--partition=nope"]' "$WORK/slurm.toml"
assert_contains "$WORK/err" "cannot get a Slurm allocation with \`salloc --ntasks="
assert_contains "$WORK/err" "invalid partition"
[[ -z "$(squeue -h)" ]] || fail "the refused request left a job: $(squeue)"

# salloc: the coordinator runs here (the login node), the workers in steps on h1..h3.
salloc -N 3 "$STREAMCTL" run -v "$WORK/slurm.toml" >"$WORK/salloc.out" 2>"$WORK/salloc.err" ||
  { slurm_show_logs; fail "the job under salloc failed: $(tail -n 5 "$WORK/salloc.err")"; }
assert_contains "$WORK/salloc.err" "links between hosts: CURVE"
cmp -s <(canonical <"$WORK/local.out") <(canonical <"$WORK/salloc.out") ||
  fail "salloc -N 3 gave other output than one host: $(diff <(canonical <"$WORK/local.out") <(canonical <"$WORK/salloc.out") | head -5)"
grep "placement: " "$WORK/salloc.err" | sed 's/.*placement: /placement: /' >"$WORK/placement"
cat "$WORK/placement"
for host in h1 h2 h3; do assert_contains "$WORK/placement" "$host: "; done
assert_contains "$WORK/placement" "this host: out[0]"
for host in h1 h2 h3; do slurm_wait_only_daemons "$host" 10 || fail "processes left on $host"; done
assert_no_processes_left

# A user's own sbatch script: the coordinator runs in the batch step on the first node and
# uses the allocation it finds.
cat >"$WORK/job.sbatch" <<EOF
#!/bin/sh
exec "$STREAMCTL" run -v "$WORK/slurm.toml" >"$WORK/sbatch.out" 2>"$WORK/sbatch.err"
EOF
sbatch --wait --parsable -N 3 -o "$WORK/sbatch.slurm-out" "$WORK/job.sbatch" >"$WORK/sbatch.id" ||
  { slurm_show_logs; fail "the sbatch job failed: $(tail -n 5 "$WORK/sbatch.err" "$WORK/sbatch.slurm-out")"; }
cmp -s <(canonical <"$WORK/local.out") <(canonical <"$WORK/sbatch.out") ||
  fail "the sbatch job gave other output than one host: $(diff <(canonical <"$WORK/local.out") <(canonical <"$WORK/sbatch.out") | head -5)"
for host in h1 h2 h3; do slurm_wait_only_daemons "$host" 10 || fail "processes left on $host"; done
slurm_wait_queue_empty 15 || fail "jobs left in the queue"
assert_no_processes_left
echo "slurm_keyed: ok"
