# A worker that stops heart-beating is a dead worker (SPEC §7): one frozen with SIGSTOP (as a
# hung process or an unreachable host would be) is killed after [restart] heartbeat_timeout,
# and the job restarts from its latest checkpoint and commits exactly the failure-free output.
source "$(dirname "$0")/lib/common.bash"

cat >"$WORK/p.toml" <<TOML
name = "frozen"
parallelism = 2
[checkpoint]
interval = "200ms"
dir = "$WORK/ck"
[restart]
strategy = "fixed"
delay = "50ms"
heartbeat_timeout = "1500ms"
[sources.gen]
type = "generator"
profile = "counter"
count = 30000
rate = 6000
[operators.keyed]
type = "map"
inputs = ["gen"]
set = { k = "seq % 11" }
[operators.updates]
type = "reduce"
inputs = ["keyed"]
key = ["k"]
aggregates = { updates = "count()" }
[sinks.out]
type = "file"
inputs = ["updates"]
path = "$WORK/out-dir"
TOML

"$STREAMCTL" -v run "$WORK/p.toml" 2>"$WORK/run.log" &
pid=$!
wait_for_text "$WORK/run.log" "records flowing"
sleep 1
victim=$(pgrep -f -- "worker --job-dir $STREAMCTL_STATE_DIR" | shuf -n 1)
kill -STOP "$victim"
wait_for_text "$WORK/run.log" "sent no heartbeat for"
set +e; wait $pid; code=$?; set -e
assert_eq 0 "$code" "exit code after a frozen worker ($(tail -3 "$WORK/run.log"))"
assert_contains "$WORK/run.log" "(pid $victim) sent no heartbeat"
assert_contains "$WORK/run.log" "restarting the job (attempt 1"
python3 - "$WORK/out-dir" <<'PY' || fail "the output after the restart is not exactly once"
import glob, json, sys
seen = {}
for path in glob.glob(sys.argv[1] + "/part-*"):
    for line in open(path):
        r = json.loads(line)
        seen.setdefault(r["k"], []).append(r["updates"])
assert len(seen) == 11, seen.keys()
for k, updates in seen.items():
    # Each key's count goes 1, 2, ... with no gap and no repeat.
    assert sorted(updates) == list(range(1, len(updates) + 1)), (k, sorted(updates)[:20])
assert sum(len(u) for u in seen.values()) == 30000
PY
assert_no_processes_left
echo ok
