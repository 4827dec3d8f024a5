# Exactly-once under failure (SPEC §7): a job with checkpoints has random workers killed with
# -9 again and again while it runs; each time the coordinator restarts it from its latest
# checkpoint, sources rewind, and the file sink publishes only what completed checkpoints
# cover. The committed output must equal that of a run without failures: no record lost, none
# twice. Then the coordinator itself is killed, and `streamctl restart JOB` finishes the job
# from what is on disk, with the same result.
source "$(dirname "$0")/lib/common.bash"
source "$(dirname "$0")/lib/exactly_once.bash"

# count_per_key: keyed tumbling event-time windows (state across checkpoints); running: a
# keyed reduce whose every update is a record (any loss or repeat shows; only a count, as
# which record comes first differs from run to run); both into one sink
# of two subtasks, so the keyed exchange and two-input alignment are exercised. Every
# checkpoint is full here (incremental ones, the default, have checkpoint_incremental.sh).
pipeline() { # NAME OUT
  cat <<TOML
name = "$1"
parallelism = 2
[checkpoint]
incremental = false
interval = "150ms"
dir = "$WORK/ck"
[restart]
strategy = "fixed"
delay = "50ms"
max_attempts = 100
[sources.gen]
type = "generator"
profile = "counter"
count = 60000
rate = 15000
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
[operators.running]
type = "reduce"
inputs = ["keyed"]
key = ["k"]
aggregates = { updates = "count()" }
[sinks.out]
type = "file"
inputs = ["count_per_key", "running"]
path = "$2"
TOML
}

pipeline reference "$WORK/expected" >"$WORK/reference.toml"
run_reference "$WORK/reference.toml" "$WORK/expected" 60000

# kill -9 a random worker every 0.3-0.8 s while the job runs.
pipeline chaos "$WORK/got" >"$WORK/chaos.toml"
run_with_kills "$WORK/chaos.toml" "$WORK/chaos.log" 8
echo "killed $KILLS worker(s); the job restarted $RESTARTS time(s)"
assert_eq 0 "$CODE" "exit code of a job that survived its failures ($(tail -3 "$WORK/chaos.log"))"
[[ $RESTARTS -ge 2 ]] || fail "only $RESTARTS restart(s): the kills did not land"
grep -q "from $WORK/ck/chaos/chk-" "$WORK/chaos.log" || fail "no restart was from a checkpoint"
assert_same_output "$WORK/got" "the output after failures differs from the output without them"
assert_no_processes_left

# A checkpoint that times out is given up and the job goes on (SPEC §7): with a 1 ms timeout
# none completes, and the output is still exactly the failure-free one.
pipeline hurried "$WORK/hurried" >"$WORK/hurried.toml"
run_expect 0 "$STREAMCTL" run "$WORK/hurried.toml" --set checkpoint.timeout=1ms --set sources.gen.rate=30000
assert_contains "$WORK/err" "within [checkpoint] timeout"
assert_same_output "$WORK/hurried" "a job whose checkpoints time out wrote other output"

# At-least-once mode does not align barriers: after kills, no record is lost (some may repeat).
cat >"$WORK/alo.toml" <<TOML
name = "alo"
parallelism = 2
[checkpoint]
interval = "150ms"
dir = "$WORK/ck"
mode = "at-least-once"
[restart]
strategy = "fixed"
delay = "50ms"
max_attempts = 100
[sources.gen]
type = "generator"
profile = "counter"
count = 30000
rate = 15000
[operators.pass]
type = "map"
inputs = ["gen"]
set = { twice = "seq * 2" }
[sinks.out]
type = "file"
inputs = ["pass"]
path = "$WORK/alo-out"
parallelism = 1
TOML
"$STREAMCTL" -v run "$WORK/alo.toml" 2>"$WORK/alo.log" &
pid=$!
wait_for_text "$WORK/alo.log" "records flowing"
for _ in 1 2 3; do
  sleep 0.4
  kill_worker || true
done
set +e; wait $pid; code=$?; set -e
assert_eq 0 "$code" "exit code of an at-least-once job after kills"
python3 - "$WORK/alo-out" <<'PY' || fail "an at-least-once job lost records"
import glob, json, sys
seen = set()
for path in glob.glob(sys.argv[1] + "/part-*"):
    for line in open(path):
        seen.add(json.loads(line)["seq"])
missing = set(range(30000)) - seen
assert not missing, f"{len(missing)} missing, e.g. {sorted(missing)[:5]}"
PY
assert_no_processes_left

# kill -9 the coordinator: its workers go; `restart` recovers the job from disk, same id.
pipeline recover "$WORK/recovered" >"$WORK/recover.toml"
# Over tcp, so that the restart shows it keeps the run's flags (run_options).
"$STREAMCTL" -v run "$WORK/recover.toml" --transport tcp 2>"$WORK/recover.log" &
pid=$!
wait_for_text "$WORK/recover.log" "records flowing"
sleep 1.5
kill -9 $pid
wait $pid 2>/dev/null || true
assert_no_processes_left
run_expect 0 "$STREAMCTL" list
assert_contains "$WORK/out" "failed"
id=$(python3 -c 'import json, sys, glob
for p in glob.glob(sys.argv[1] + "/jobs/recover-*/job.json"): print(json.load(open(p))["id"])' "$STREAMCTL_STATE_DIR")
run_expect 0 "$STREAMCTL" -v restart "$id"
assert_contains "$WORK/err" "restarting job $id from $WORK/ck/recover/chk-"
assert_contains "$STREAMCTL_STATE_DIR/jobs/$id/job.json" '"control": "tcp://127.0.0.1:'
run_expect 0 "$STREAMCTL" status "$id" --json
assert_contains "$WORK/out" '"state":"finished"'
assert_same_output "$WORK/recovered" "the job restarted after its coordinator died wrote other output"
assert_no_processes_left
echo ok
