# Rescales under failure (SPEC §7): a job with periodic checkpoints, incremental as by default,
# is rescaled again and again to a random parallelism while a random worker is killed with -9
# a random moment after each request: during the rescale's checkpoint, while the old workers
# halt, while the new ones start and restore. A rescale either completes (exit 0) or fails
# (exit 1) and the job restarts from its latest checkpoint; the committed output must be
# exactly that of a run without failures. Seeded: a failure prints the seed to rerun with.
source "$(dirname "$0")/lib/common.bash"
source "$(dirname "$0")/lib/exactly_once.bash"

seed_random rescale_kill RESCALE_KILL_SEED

pipeline() { # NAME OUT
  cat <<TOML
name = "$1"
parallelism = 2
[checkpoint]
interval = "200ms"
dir = "$WORK/ck"
[restart]
strategy = "fixed"
delay = "50ms"
max_attempts = 100
[sources.gen]
type = "generator"
profile = "counter"
count = 60000
rate = 5000
event_time = "ts"
[operators.keyed]
type = "map"
inputs = ["gen"]
set = { k = "seq % 97" }
[operators.count_per_key]
type = "window"
inputs = ["keyed"]
key = ["k"]
window = { kind = "tumbling", size = "500ms" }
aggregates = { n = "count()", s = "sum(seq)" }
[operators.running]
type = "reduce"
inputs = ["keyed"]
key = ["k"]
aggregates = { n = "count()" }
[sinks.out]
type = "file"
inputs = ["count_per_key", "running"]
path = "$2"
TOML
}

pipeline rescaled "$WORK/committed" >"$WORK/job.toml"
run_reference "$WORK/job.toml" "$WORK/committed" 1000
rm -rf "$WORK/committed" "$WORK/ck"

"$STREAMCTL" -v run "$WORK/job.toml" 2>"$WORK/run.log" &
pid=$!
wait_for_text "$WORK/run.log" "records flowing"
completed=0
refused=0
for round in 1 2 3 4 5 6; do
  kill -0 $pid 2>/dev/null || break
  parallelism=$((RANDOM % 3 + 1))
  "$STREAMCTL" rescale rescaled --parallelism $parallelism >"$WORK/rescale.out" 2>"$WORK/rescale.err" &
  rescale=$!
  # 0-290 ms after the request: before, in or after the rescale's checkpoint, or in the restore.
  sleep "0.$((RANDOM % 30))"
  kill_worker || true
  set +e; wait $rescale; code=$?; set -e
  case $code in
    0) completed=$((completed + 1)) ;;
    1) refused=$((refused + 1)) ;; # the checkpoint failed, or the job was restarting
    *) cat "$WORK/rescale.err" >&2; fail "round $round: rescale to $parallelism exited $code" ;;
  esac
  sleep "0.$((RANDOM % 5 + 3))"
done
set +e; wait $pid; code=$?; set -e
assert_eq 0 "$code" "exit code of the job rescaled and killed (rescales: $completed completed, $refused failed)"
assert_same_output "$WORK/committed" "a job rescaled while workers were killed wrote other output"
verify_checkpoints "$WORK/ck/rescaled"
assert_no_processes_left
echo "ok: $completed rescales completed, $refused failed (seed $SEED)"
