# SIGINT stops a running job gracefully (sources end, sinks commit, exit 130); a second signal
# cancels; SIGTERM stops too. No process is left behind in any case.
source "$(dirname "$0")/lib/common.bash"

cat >"$WORK/p.toml" <<TOML
name = "endless"
parallelism = 2
[sources.gen]
type = "generator"
profile = "counter"
rate = 20000
[operators.even]
type = "filter"
inputs = ["gen"]
where = "seq % 2 == 0"
[sinks.out]
type = "file"
inputs = ["even"]
path = "$WORK/out"
parallelism = 1
TOML

"$STREAMCTL" -v run "$WORK/p.toml" 2>"$WORK/err" &
pid=$!
# Signal a job that is running, however long start-up takes on a loaded machine: the generator
# makes 20000 records a second, so a second after START there are thousands to commit.
wait_for_text "$WORK/err" "records flowing"
sleep 1
kill -INT $pid
set +e
wait_exit $pid
code=$?
set -e
assert_eq 130 "$code" "exit code after SIGINT"
assert_contains "$WORK/err" "stopping the job gracefully"
ls "$WORK/out"/part-0-0.json >/dev/null || fail "the sink did not commit its part file"
records=$(wc -l <"$WORK/out/part-0-0.json")
[[ $records -gt 1000 ]] || fail "only $records records committed"
# What was committed is whole: every line is a record with an even seq.
python3 - "$WORK/out/part-0-0.json" <<'PY' || fail "committed output is damaged"
import json, sys
for line in open(sys.argv[1]):
    assert json.loads(line)["seq"] % 2 == 0
PY
assert_no_processes_left

# SIGTERM: the same graceful stop, exit 143.
"$STREAMCTL" run "$WORK/p.toml" 2>"$WORK/err" &
pid=$!
sleep 1
kill -TERM $pid
set +e
wait_exit $pid
code=$?
set -e
assert_eq 143 "$code" "exit code after SIGTERM"
assert_no_processes_left

# A signal while the workers are still starting stops the job too.
for delay in 0.05 0.2; do
  "$STREAMCTL" run "$WORK/p.toml" 2>"$WORK/err" &
  pid=$!
  sleep $delay
  kill -TERM $pid
  set +e
  wait_exit $pid
  code=$?
  set -e
  assert_eq 143 "$code" "exit code after SIGTERM at start-up (${delay}s)"
  assert_no_processes_left
done

# A stdin source stops on SIGINT even while it waits for input that never comes.
cat >"$WORK/stdin.toml" <<'TOML'
name = "waiting"
[sources.in]
type = "stdin"
[sinks.out]
type = "stdout"
inputs = ["in"]
TOML
mkfifo "$WORK/fifo"
sleep 30 >"$WORK/fifo" &
writer=$!
"$STREAMCTL" -v run "$WORK/stdin.toml" <"$WORK/fifo" >"$WORK/out.txt" 2>"$WORK/err" &
pid=$!
# A background job of a non-interactive shell starts with SIGINT ignored (POSIX), and a signal
# that comes before streamctl takes it over is lost: signal a job that is running.
wait_for_text "$WORK/err" "records flowing"
kill -INT $pid
set +e
wait_exit $pid
code=$?
set -e
kill $writer 2>/dev/null || true
assert_eq 130 "$code" "exit code of a waiting stdin job after SIGINT"
assert_no_processes_left

# Two signals: cancel at once; nothing is committed by a cancelled file sink.
cat >"$WORK/slow.toml" <<TOML
name = "slow"
[sources.gen]
type = "generator"
rate = 1000
[sinks.out]
type = "file"
inputs = ["gen"]
path = "$WORK/slow-out"
TOML
"$STREAMCTL" -v run "$WORK/slow.toml" 2>"$WORK/err" &
pid=$!
wait_for_text "$WORK/err" "records flowing"
sleep 0.5
# Both signals before the job can drain: the second cancels.
kill -INT $pid; kill -INT $pid
set +e
wait_exit $pid
code=$?
set -e
assert_eq 130 "$code" "exit code after two SIGINTs"
assert_no_processes_left

# Signals while the sinks publish the job's last output into a reader that stalls: the
# coordinator waited for its workers without reading signals, so neither the first nor the
# second SIGINT did anything until the reader went away. Now the first is acknowledged and the
# second cancels: the workers are killed after their grace, and the job exits 130.
start_stalled_publisher "$WORK/err"
kill -INT $pid
wait_for_text "$WORK/err" "the sinks are publishing the job's last output (send it again to cancel)"
kill -INT $pid
set +e
wait_exit $pid 30
code=$?
set -e
kill $reader 2>/dev/null || true
assert_eq 130 "$code" "exit code after two SIGINTs while the sinks publish"
assert_contains "$WORK/err" "cancelling the job while its sinks publish its last output"
assert_no_processes_left

# Two signals to a job that takes checkpoints (issue 7, finding 8): the first makes every
# task close its part file for a last checkpoint, the second cancels before that checkpoint
# completes. The closed files were left behind as .part-* although the man page says a
# cancelled job deletes them. Now the sink directory holds only the part files of completed
# checkpoints, intact. The dedup's state (every seq, 200,000 a second) makes the last
# checkpoint's files take a while to write, so the second signal lands after the sinks closed
# their parts and before the checkpoint completes (at 20,000 a second it completed within
# 80 ms on a quiet machine, before the test could signal: all 5 attempts of a run missed);
# an attempt where it completed anyway, or the job ended first, is tried again.
cat >"$WORK/ck.toml" <<TOML
name = "cancelled"
parallelism = 2
[checkpoint]
interval = "500ms"
[sources.gen]
type = "generator"
rate = 200000
[operators.once]
type = "dedup"
inputs = ["gen"]
key = ["seq"]
within = "1h"
[sinks.out]
type = "file"
inputs = ["once"]
path = "$WORK/ck-out"
TOML
exercised=0
for attempt in 1 2 3 4 5; do
  "$STREAMCTL" -vv run "$WORK/ck.toml" 2>"$WORK/err" &
  pid=$!
  wait_for_text "$WORK/err" "checkpoint 4 complete" 60
  kill -INT $pid
  wait_for_text "$WORK/err" "taking a last checkpoint"
  for _ in $(seq 200); do
    last=$(sed -n '/taking a last checkpoint/,$p' "$WORK/err" | sed -n 's/.*checkpoint \([0-9]*\) triggered into.*/\1/p' | head -1)
    [[ -n $last ]] && break
    sleep 0.05
  done
  [[ -n $last ]] || fail "the last checkpoint was not triggered: $(tail -5 "$WORK/err")"
  # All four tasks (two generator, two dedup+sink) have taken their state: the sinks have closed
  # their parts for checkpoint $last.
  for _ in $(seq 600); do
    (($(grep -c "checkpoint $last: state taken" "$WORK/err") >= 4)) && break
    sleep 0.05
  done
  if ! kill -INT $pid 2>/dev/null; then
    # The last checkpoint completed and the job ended before the second signal: again.
    wait_exit $pid || true
    rm -rf "$WORK/ck-out" "$STREAMCTL_STATE_DIR/checkpoints/cancelled"
    continue
  fi
  set +e
  wait_exit $pid
  code=$?
  set -e
  assert_eq 130 "$code" "exit code after two SIGINTs (checkpointing job, attempt $attempt)"
  assert_no_processes_left
  left=$(find "$WORK/ck-out" -name '.part-*' | head -5)
  [[ -z $left ]] || fail "a cancelled job left files in progress in its sink directory: $left"
  ls "$WORK/ck-out"/part-* >/dev/null 2>&1 || fail "no part file of the completed checkpoints was published"
  # What was published is whole: every line a record, no seq twice.
  python3 - "$WORK/ck-out" <<'PY' || fail "committed output is damaged"
import glob, json, sys
seen = set()
for name in glob.glob(sys.argv[1] + "/part-*"):
    for line in open(name):
        seq = json.loads(line)["seq"]
        assert seq not in seen, seq
        seen.add(seq)
PY
  rm -rf "$WORK/ck-out" "$STREAMCTL_STATE_DIR/checkpoints/cancelled"
  if grep -q "cancelling the job" "$WORK/err" && ! grep -q "checkpoint $last complete" "$WORK/err"; then
    exercised=1
    break
  fi
done
((exercised)) || fail "no attempt cancelled the job between its sinks' last pre-commit and the checkpoint's completion"

# A worker killed with -9 leaves its part in progress behind; the next run of the job deletes
# it (it is this job's, and no live writer holds it), and publishes nothing of it.
mkdir -p "$WORK/stale-out"
echo '{"seq": -1}' >"$WORK/stale-out/.part-0-0.json"
echo '{"seq": -2}' >"$WORK/stale-out/.part-1-7.json"
cat >"$WORK/stale.toml" <<TOML
name = "stale"
parallelism = 2
[sources.gen]
type = "generator"
count = 100
[sinks.out]
type = "file"
inputs = ["gen"]
path = "$WORK/stale-out"
TOML
# (Not run_expect: its $WORK/out is the first job's sink directory here.)
"$STREAMCTL" run "$WORK/stale.toml" 2>"$WORK/err" &
wait_exit $! || fail "the run after stale parts failed: $(cat "$WORK/err")"
left=$(find "$WORK/stale-out" -name '.part-*' | head -5)
[[ -z $left ]] || fail "a new run left stale files in progress: $left"
assert_eq 100 "$(cat "$WORK/stale-out"/part-* | wc -l)" "records published by the run after a stale part"
if grep -q '"seq": -' "$WORK/stale-out"/part-*; then fail "a stale part in progress was published"; fi
echo ok
