#!/usr/bin/env bash
# `streamctl run --launcher slurm` outside any allocation makes one itself (salloc, issue 8):
# the keyed window job of slurm_keyed.sh gives exactly the output of the job on one host, with
# [cluster] nodes = 3 and with --ntasks by the job's tasks; afterwards no job is left in the
# queue (the allocation was released). kill -9 of the coordinator mid-job releases it too,
# within a bounded wait, and so does SIGINT. salloc's failures (a bad partition; more nodes
# than there are, which Slurm queues until it is withdrawn at 60 s) refuse the job (exit 2) in
# salloc's words.
source "$SOURCE_DIR/tests/e2e/lib/common.bash"
source "$SOURCE_DIR/tests/hosts/lib/hosts.bash"
source "$SOURCE_DIR/tests/hosts/lib/slurm.bash"
hosts_require
slurm_require
hosts_up 3
slurm_up
# Outside any allocation, whatever ran this test.
unset SLURM_JOB_ID SLURM_JOB_NODELIST SLURM_JOB_CPUS_PER_NODE SLURM_JOBID

python3 - >"$WORK/events.jsonl" <<'PY'
import random
random.seed(8)
for i in range(60000):
    print('{"ts": %d, "k": "key-%d", "v": %d}' % (i * 3, random.randrange(200), random.randrange(1000)))
PY

cat >"$WORK/keyed.toml" <<TOML
name = "slurm-allocate"
parallelism = 3
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

"$STREAMCTL" run "$WORK/keyed.toml" >"$WORK/local.out" 2>"$WORK/local.err" || fail "the job on one host failed: $(tail -3 "$WORK/local.err")"
[[ -s "$WORK/local.out" ]] || fail "the job on one host wrote nothing"

# [cluster] nodes = 3: salloc --nodes=3; the workers spread over h1..h3.
"$STREAMCTL" run -v --launcher slurm --set cluster.nodes=3 "$WORK/keyed.toml" >"$WORK/nodes.out" 2>"$WORK/nodes.err" ||
  { slurm_show_logs; fail "the job with its own allocation failed: $(tail -n 5 "$WORK/nodes.err")"; }
assert_contains "$WORK/nodes.err" "slurm: allocated job "
assert_contains "$WORK/nodes.err" " on nodes h[1-3]"
assert_contains "$WORK/nodes.err" "salloc --nodes=3"
assert_contains "$WORK/nodes.err" "slurm: released job "
assert_contains "$WORK/nodes.err" "links between hosts: CURVE"
cmp -s <(canonical <"$WORK/local.out") <(canonical <"$WORK/nodes.out") ||
  fail "its own allocation gave other output than one host: $(diff <(canonical <"$WORK/local.out") <(canonical <"$WORK/nodes.out") | head -5)"
grep "placement: " "$WORK/nodes.err" | sed 's/.*placement: /placement: /' >"$WORK/placement"
for host in h1 h2 h3; do assert_contains "$WORK/placement" "$host: "; done
slurm_wait_queue_empty 10 || fail "the allocation was not released"
for host in h1 h2 h3; do slurm_wait_only_daemons "$host" 10 || fail "processes left on $host"; done
assert_no_processes_left

# No nodes: salloc --ntasks by the tasks that run on nodes (not the stdout sink).
"$STREAMCTL" run -v --launcher slurm "$WORK/keyed.toml" >"$WORK/tasks.out" 2>"$WORK/tasks.err" ||
  { slurm_show_logs; fail "the job with --ntasks failed: $(tail -n 5 "$WORK/tasks.err")"; }
assert_contains "$WORK/tasks.err" "salloc --ntasks=6"
cmp -s <(canonical <"$WORK/local.out") <(canonical <"$WORK/tasks.out") ||
  fail "the --ntasks allocation gave other output than one host"
slurm_wait_queue_empty 10 || fail "the --ntasks allocation was not released"
assert_no_processes_left

# salloc's refusals end the job before anything starts (exit 2), in salloc's words.
run_expect 2 "$STREAMCTL" run --launcher slurm --set 'cluster.slurm_options=["--partition=nope"]' "$WORK/keyed.toml"
assert_contains "$WORK/err" "cannot get a Slurm allocation with \`salloc --ntasks=6 --partition=nope\`"
assert_contains "$WORK/err" "invalid partition"
# More nodes than the partition has: Slurm queues the request; not granted within 60 s, it is
# withdrawn.
run_expect 2 "$STREAMCTL" run --launcher slurm --set cluster.nodes=9 "$WORK/keyed.toml"
assert_contains "$WORK/err" "salloc --nodes=9\`: salloc was granted no allocation within 60 s"
assert_contains "$WORK/err" "Pending job allocation"
slurm_wait_queue_empty 10 || fail "a refused request left a job"
assert_no_processes_left

# kill -9 of the coordinator mid-job: salloc's stdin closes (its `cat` ends) and PDEATHSIG
# reaches it, so the allocation goes; the sruns die with the coordinator, so do their steps.
cat >"$WORK/long.toml" <<TOML
name = "slurm-allocate-long"
parallelism = 3
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
"$STREAMCTL" run -v --launcher slurm --set cluster.nodes=3 "$WORK/long.toml" >"$WORK/kill.out" 2>"$WORK/kill.err" &
coordinator=$!
wait_for_text "$WORK/kill.err" "records flowing" 60
allocation=$(squeue -h -o %i)
[[ "$allocation" =~ ^[0-9]+$ ]] || fail "expected the job's allocation in the queue, got [$allocation]"
assert_contains "$WORK/kill.err" "slurm: allocated job $allocation on nodes h[1-3]"
salloc_pid=$(pgrep -P "$coordinator" -x salloc)
[[ -n "$salloc_pid" ]] || fail "no salloc under the coordinator"
# Not one of the coordinator's files (this test's lock, say): it would be held past its end.
[[ -z "$(ls -l /proc/"$salloc_pid"/fd | grep -e ' -> /')" ]] ||
  fail "salloc holds files of the coordinator's: $(ls -l /proc/"$salloc_pid"/fd)"
kill -9 "$coordinator"
set +e
wait "$coordinator"
set -e
slurm_wait_queue_empty 20 || fail "kill -9 of the coordinator left its allocation"
# salloc itself ends too (a salloc given SIGTERM there was seen to spin on forever).
deadline=$((SECONDS + 15))
while [[ "$(ps -o stat= -p "$salloc_pid" || true)" =~ ^[^Z] ]]; do # a zombie has ended
  ((SECONDS < deadline)) || fail "salloc ($salloc_pid) still runs after kill -9 of the coordinator"
  sleep 0.2
done
for host in h1 h2 h3; do slurm_wait_only_daemons "$host" 15 || fail "processes left on $host after kill -9 of the coordinator"; done
assert_no_processes_left

# Ctrl-C (SIGINT to the coordinator): the job stops and the allocation is released in order.
"$STREAMCTL" run -v --launcher slurm --set cluster.nodes=3 "$WORK/long.toml" >"$WORK/int.out" 2>"$WORK/int.err" &
coordinator=$!
wait_for_text "$WORK/int.err" "records flowing" 60
kill -INT "$coordinator"
set +e
wait "$coordinator"
set -e
assert_contains "$WORK/int.err" "slurm: released job "
slurm_wait_queue_empty 10 || fail "SIGINT left the allocation"
for host in h1 h2 h3; do slurm_wait_only_daemons "$host" 15 || fail "processes left on $host after SIGINT"; done
assert_no_processes_left
echo "slurm_allocate: ok"
