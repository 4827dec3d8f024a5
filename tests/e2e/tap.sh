#!/usr/bin/env bash
# `streamctl tap JOB NODE`: prints the records leaving a node of a running job as JSON lines
# (a source, an operator at parallelism 2, a sink), with --limit and --sample; stops with its
# job; goes on across a restart after kill -9 of a worker; and leaves the job's output exactly
# what it is without a tap. Wrong node, job or --sample: errors that say so.
source "$(dirname "$0")/lib/common.bash"
seed=${TAP_SEED:-$RANDOM}
echo "seed $seed (TAP_SEED=$seed to repeat)"
RANDOM=$seed

records=16000
cat >"$WORK/p.toml" <<TOML
name = "tapped"
parallelism = 2
[checkpoint]
interval = "300ms"
dir = "$WORK/ck"
[restart]
strategy = "fixed"
delay = "100ms"
max_attempts = 10
[sources.gen]
type = "generator"
profile = "counter"
count = $records
rate = 2000
[operators.dbl]
type = "map"
inputs = ["gen"]
set = { double = "seq * 2" }
[sinks.out]
type = "file"
inputs = ["dbl"]
path = "$WORK/committed"
parallelism = 1
TOML

# Every line is a JSON record of the map's output: double = 2 * seq.
check_doubled() { # FILE COUNT
  python3 - "$1" "$2" <<'PY'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
if len(lines) != int(sys.argv[2]):
    sys.exit(f"{len(lines)} lines, expected {sys.argv[2]}")
for l in lines:
    r = json.loads(l)
    if r.get("double") != 2 * r["seq"]:
        sys.exit(f"not a record of the map: {l}")
PY
}

# Unknown job: what status says.
set +e
"$STREAMCTL" status nosuchjob >/dev/null 2>"$WORK/status-err"
status_code=$?
set -e
run_expect "$status_code" "$STREAMCTL" tap nosuchjob dbl
assert_contains "$WORK/err" "nosuchjob"

run_expect 0 "$STREAMCTL" -v run "$WORK/p.toml" --detach
id=$(cat "$WORK/out")
log="$STREAMCTL_STATE_DIR/jobs/$id/log"
wait_for_text "$log" "records flowing"

# Mistakes, first: they need the job running, and under the sanitizers on a busy machine it
# had finished after the taps below (CI, seed 14920).
run_expect 2 "$STREAMCTL" tap "$id" dbll
assert_contains "$WORK/err" "the job has no node 'dbll'; did you mean 'dbl'?"
run_expect 2 "$STREAMCTL" tap "$id" dbl --sample 0
assert_contains "$WORK/err" "--sample must be above 0"

# --limit: exactly that many records of the node, then exit 0.
run_expect 0 timeout 30 "$STREAMCTL" tap "$id" dbl --limit 50
assert_contains "$WORK/err" "tapping 'dbl' of job $id (2 subtasks now)"
check_doubled "$WORK/out" 50 || fail "tap --limit 50"

# --sample: a random share; still records of the node.
run_expect 0 timeout 30 "$STREAMCTL" tap "$id" dbl --sample 0.1 --limit 20
check_doubled "$WORK/out" 20 || fail "tap --sample 0.1"

# A source and a sink can be tapped too (a sink's tap shows what it writes).
run_expect 0 timeout 30 "$STREAMCTL" tap "$id" gen --limit 5
assert_eq 5 "$(grep -c '"seq"' "$WORK/out")" "records tapped from the source"
run_expect 0 timeout 30 "$STREAMCTL" tap "$id" out --limit 5
check_doubled "$WORK/out" 5 || fail "tap of the sink"

# A closed stdout ends the tap quietly.
set +e
timeout 30 "$STREAMCTL" tap "$id" dbl 2>"$WORK/head-err" | head -3 >"$WORK/head-out"
codes=("${PIPESTATUS[@]}")
set -e
assert_eq 0 "${codes[0]}" "exit code of tap | head -3"
check_doubled "$WORK/head-out" 3 || fail "tap | head -3"

# A tap with no limit goes on across a restart and ends with the job: a job of its own,
# started now, so that it still runs however long the taps above took (under the sanitizers
# on a busy machine the first job had finished before this tap could start).
first=$id
sed -e 's/^name = "tapped"/name = "tapped-long"/' -e "s|$WORK/committed|$WORK/committed-long|" \
  "$WORK/p.toml" >"$WORK/long.toml"
run_expect 0 "$STREAMCTL" -v run "$WORK/long.toml" --detach
id=$(cat "$WORK/out")
log="$STREAMCTL_STATE_DIR/jobs/$id/log"
wait_for_text "$log" "records flowing"
"$STREAMCTL" tap "$id" dbl >"$WORK/long-out" 2>"$WORK/long-err" &
tap_pid=$!
wait_for_text "$WORK/long-err" "tapping 'dbl'"
sleep "0.$((RANDOM % 9 + 1))"
victim=$(pgrep -f -- "worker --job-dir $STREAMCTL_STATE_DIR/jobs/$id" | shuf -n 1 --random-source=<(yes $seed) || true)
[[ -n "$victim" ]] || fail "no worker to kill"
kill -9 "$victim"
wait_for_text "$log" "restarting" 30
before=$(wc -l <"$WORK/long-out")
deadline=$((SECONDS + 20))
# 100 more lines, or fewer when the job finished first (a slow restart, as under the
# sanitizers, leaves less input): then it must have printed after the restart and ended with
# the job, not at the restart.
until (($(wc -l <"$WORK/long-out") > before + 100)); do
  ((SECONDS < deadline)) || fail "the tap printed nothing after the restart (had $before lines)"
  if ! kill -0 $tap_pid 2>/dev/null; then
    grep -qF "has ended (finished)" "$WORK/long-err" && (($(wc -l <"$WORK/long-out") > before)) && break
    fail "the tap ended at the restart: $(cat "$WORK/long-err")"
  fi
  sleep 0.2
done
set +e; timeout 60 tail --pid=$tap_pid -f /dev/null; wait $tap_pid; code=$?; set -e
echo "the long tap printed $(wc -l <"$WORK/long-out") records ($before before the restart)"
assert_eq 0 "$code" "exit code of the tap when its job ended"
assert_contains "$WORK/long-err" "job $id has ended (finished)"
python3 - "$WORK/long-out" <<'PY' || fail "the long tap printed something that is not a record of the map"
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    assert r["double"] == 2 * r["seq"], l
PY

# The first job ends on its own.
for _ in $(seq 600); do
  grep -q '"state": "finished"' "$STREAMCTL_STATE_DIR/jobs/$first/job.json" && break
  sleep 0.1
done
assert_contains "$STREAMCTL_STATE_DIR/jobs/$first/job.json" '"state": "finished"'

# The jobs' output is what it is without a tap: every record once, despite the kill.
for committed in "$WORK/committed" "$WORK/committed-long"; do
  python3 - "$committed" "$records" <<'PY' || fail "the output in $committed changed"
import glob, json, sys
seqs = []
for path in glob.glob(sys.argv[1] + "/part-*"):
    for l in open(path):
        r = json.loads(l)
        assert r["double"] == 2 * r["seq"], l
        seqs.append(r["seq"])
n = int(sys.argv[2])
if sorted(seqs) != list(range(n)):
    sys.exit(f"{len(seqs)} records, {len(set(seqs))} distinct; expected 0..{n - 1} once each")
PY
done

# An ended job: says so, as status and stop do.
run_expect 2 "$STREAMCTL" tap "$first" dbl
assert_contains "$WORK/err" "job $first is not running (it is finished)"
assert_no_processes_left
echo ok
