# Deferred snapshots ([checkpoint] snapshot = "deferred") under failure: key groups frozen at a
# barrier are serialised by the writer's thread while the task goes on (and by the task when it
# changes one first). Workers are killed with -9 again and again: the first kill soon after the
# start (before or at the first checkpoint), the others every 0.3-0.8 s, so that many land while
# a checkpoint's frozen groups are being serialised (a checkpoint every 150 ms of a state that
# keeps growing, every one full in the first run, incremental with rolling wholes in the second). The output must be
# that of a run without failures, exactly once, groups must really have been deferred, and
# what is left of the checkpoints verifies.
source "$(dirname "$0")/lib/common.bash"
source "$(dirname "$0")/lib/exactly_once.bash"

seed_random checkpoint_deferred DEFERRED_SEED

# `growing` (a window of one hour) holds a key per 4 records, so the state grows all along and
# every full checkpoint defers all of it; `ticks` fires every 250 ms, right after many barriers,
# touching frozen groups; `running` (a reduce with a ttl) sweeps its groups; `sessions` (session
# windows, a burst of 300 records per key every 1.8 s) fire and merge after barriers. Parallelism 2, so
# a reduce emits only what does not depend on the order its two inputs interleave in.
pipeline() { # NAME OUT INCREMENTAL
  cat <<TOML
name = "$1"
parallelism = 2
[checkpoint]
interval = "150ms"
dir = "$WORK/ck"
snapshot = "deferred"
incremental = $3
rolling = $3
full_every = 4
retain = 2
[restart]
strategy = "fixed"
delay = "50ms"
max_attempts = 100
[sources.gen]
type = "generator"
profile = "counter"
count = 80000
rate = 16000
event_time = "ts"
[operators.keyed]
type = "map"
inputs = ["gen"]
set = { wide_key = "seq / 4", fast_key = "seq % 37", slow_key = "seq / 300 % 97" }
[operators.growing]
type = "window"
inputs = ["keyed"]
key = ["wide_key"]
window = { kind = "tumbling", size = "1h" }
aggregates = { n = "count()", s = "sum(seq)" }
[operators.ticks]
type = "window"
inputs = ["keyed"]
key = ["fast_key"]
window = { kind = "sliding", size = "500ms", slide = "250ms" }
aggregates = { n = "count()", s = "sum(seq)" }
[operators.running]
type = "reduce"
inputs = ["keyed"]
key = ["slow_key"]
ttl = "1h"
aggregates = { updates = "count()" }
[operators.sessions]
type = "window"
inputs = ["keyed"]
key = ["slow_key"]
window = { kind = "session", gap = "500ms" }
aggregates = { n = "count()", s = "sum(seq)", top = "max(seq)" }
[sinks.out]
type = "file"
inputs = ["growing", "ticks", "running", "sessions"]
path = "$2"
TOML
}

pipeline reference "$WORK/expected" false >"$WORK/reference.toml"
run_reference "$WORK/reference.toml" "$WORK/expected" 80000

for incremental in false true; do
  name=chaos-$incremental
  pipeline "$name" "$WORK/got-$incremental" $incremental >"$WORK/$name.toml"
  "$STREAMCTL" -vv run "$WORK/$name.toml" 2>"$WORK/$name.log" &
  pid=$!
  wait_for_text "$WORK/$name.log" "records flowing"
  # The first kill before the first checkpoint completes, or while its groups are written.
  sleep "0.$((RANDOM % 3))$((RANDOM % 10))"
  first=0
  if kill_worker; then first=1; fi
  kill_workers_while $pid 8
  kills=$((KILLS + first))
  set +e; wait $pid; code=$?; set -e
  restarts=$(grep -c "restarting the job" "$WORK/$name.log" || true)
  deferred=$(grep -c "key group(s) deferred" "$WORK/$name.log" || true)
  written=$(grep -c "deferred groups written" "$WORK/$name.log" || true)
  echo "incremental = $incremental: killed $kills worker(s); the job restarted $restarts time(s);" \
    "$deferred snapshot(s) deferred groups, $written wrote them"
  assert_eq 0 "$code" "exit code of a job that survived its failures ($(tail -3 "$WORK/$name.log"))"
  [[ $restarts -ge 2 ]] || fail "only $restarts restart(s): the kills did not land"
  [[ $written -ge 1 ]] || fail "no snapshot wrote deferred groups (snapshot = \"deferred\" had no effect)"
  assert_same_output "$WORK/got-$incremental" "incremental = $incremental: the output after failures differs from the output without them"
  assert_no_processes_left
  verify_checkpoints "$WORK/ck/$name"
done

# A savepoint and stop of a job with deferred snapshots, restored: exactly the reference.
pipeline stopped "$WORK/stopped" true >"$WORK/stopped.toml"
"$STREAMCTL" -vv run "$WORK/stopped.toml" --set sources.gen.rate=8000 2>"$WORK/stopped.log" &
pid=$!
wait_for_text "$WORK/stopped.log" "records flowing"
sleep "1.$((RANDOM % 10))"
run_expect 0 "$STREAMCTL" stop stopped
savepoint=$(cat "$WORK/out")
[[ -f $savepoint/_metadata ]] || fail "stop printed '$savepoint', not a savepoint"
set +e; wait $pid; code=$?; set -e
assert_eq 0 "$code" "exit code of the stopped job ($(tail -3 "$WORK/stopped.log"))"
run_expect 0 "$STREAMCTL" snapshot verify "$savepoint"
run_expect 0 "$STREAMCTL" run "$WORK/stopped.toml" --from-savepoint "$savepoint" --set sources.gen.rate=0
assert_same_output "$WORK/stopped" "a savepoint taken with deferred snapshots restored to other output than the reference"
assert_no_processes_left

# status --json reports, per subtask, the bytes of key groups the task copied on first write
# for its last checkpoint: a window of 1 M keys (count() and sum() cells are plain bytes) fed
# without pause, so that the batches after a barrier touch groups the writer has not reached.
# Not every checkpoint copies (on a loaded machine the writer may reach a group first), and
# status shows the last one: so the job runs until status has shown a copy, or for a minute,
# and is then stopped (a fixed count of 3 M records ended before a CI run's status saw one).
cat >"$WORK/copies.toml" <<TOML
name = "copies"
[checkpoint]
interval = "200ms"
dir = "$WORK/ck"
snapshot = "deferred"
[sources.gen]
type = "generator"
profile = "counter"
rate = 500000
event_time = "ts"
[operators.keyed]
type = "map"
inputs = ["gen"]
set = { k = "seq % 1000000" }
[operators.per_key]
type = "window"
inputs = ["keyed"]
key = ["k"]
window = { kind = "tumbling", size = "3650d" }
aggregates = { n = "count()", s = "sum(seq)" }
[sinks.out]
type = "file"
inputs = ["per_key"]
path = "$WORK/copies"
TOML
"$STREAMCTL" -vv run "$WORK/copies.toml" 2>"$WORK/copies.log" &
pid=$!
wait_for_text "$WORK/copies.log" "records flowing"
copied=0
deadline=$((SECONDS + 60))
while kill -0 $pid 2>/dev/null && [[ $copied -eq 0 ]] && ((SECONDS < deadline)); do
  "$STREAMCTL" status copies --json >"$WORK/status.json" 2>"$WORK/status.err" || true
  copied=$(python3 -c 'import json, sys
try:
    ops = {o["name"]: o for o in json.load(open(sys.argv[1]))["operators"]}
    print(max(s["last_checkpoint"]["copied_bytes"] for s in ops["per_key"]["subtasks"]))
except (ValueError, KeyError):
    print(0)' "$WORK/status.json")
  sleep 0.1
done
run_expect 0 "$STREAMCTL" stop copies
set +e; wait $pid; code=$?; set -e
assert_eq 0 "$code" "exit code of the copies job ($(tail -3 "$WORK/copies.log"))"
logged=$(grep -cE "and [1-9][0-9]* copied \(" "$WORK/copies.log" || true)
((logged > 0)) || fail "the copies job copied no group (its log: $(grep -m3 'deferred groups written' "$WORK/copies.log"))"
((copied > 0)) || fail "status --json never showed copied_bytes > 0 in a minute, though $logged checkpoint(s) copied groups; the last status: $(head -c 2000 "$WORK/status.json") $(cat "$WORK/status.err")"
echo "status --json showed $copied bytes copied by a checkpoint"
assert_no_processes_left
echo ok
