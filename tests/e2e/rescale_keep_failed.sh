# A rescale whose checkpoint fails leaves the job running as before, and the next rescale still
# keeps workers with exactly the right state. The reduce's worker is stopped (SIGSTOP) while a
# rescale is asked for, so the rescale's checkpoint times out after the window's worker took its
# snapshot of it: that worker then holds the checkpoint's state (kept_chain.hpp: it fires no
# processing-time timers) until the failure says to go on (RESUME). The job must go on, and what
# the worker processes after that must not be taken for the failed checkpoint's state: the
# second rescale, asked once the stopped worker runs again, keeps both workers, and the
# committed output is exactly that of a run without rescales.
source "$(dirname "$0")/lib/common.bash"
source "$(dirname "$0")/lib/exactly_once.bash"
source "$(dirname "$0")/lib/kept_workers.bash"

# Sanitized and on a loaded machine, 30,000 records (15 s) ended before the second rescale.
records=$([[ ${STREAMCTL_SANITIZED:-0} == 1 ]] && echo 90000 || echo 30000)
kept_workers_pipeline failed "$WORK/committed" $records 2000 1500ms >"$WORK/job.toml"
run_reference "$WORK/job.toml" "$WORK/committed" 1000
rm -rf "$WORK/committed" "$WORK/ck"

"$STREAMCTL" -vv run "$WORK/job.toml" 2>"$WORK/run.log" &
job=$!
wait_for_text "$WORK/run.log" "records flowing"
sleep 1
stopped=$(pid_of failed running 0)
[[ -n $stopped ]] || fail "no pid for the reduce's worker"
window=$(pid_of failed count_per_key 0)
# The trap's cleanup must not leave a stopped process behind, whatever fails below.
trap 'kill -CONT '"$stopped"' 2>/dev/null || true; cleanup' EXIT

# What this test is about: the window's worker takes its snapshot of the failed checkpoint. At
# 2000 records/s what the stopped worker does not read fits in the queues for a while, so the
# map is not held back and passes the barrier on; a machine slow enough to let the queues fill
# before the barrier comes tries again (each try is a failed rescale all the same).
taken=0
for try in 1 2 3; do
  kill -STOP "$stopped"
  run_expect 1 "$STREAMCTL" rescale failed --parallelism 2
  kill -CONT "$stopped"
  assert_contains "$WORK/err" "within [checkpoint] timeout"
  wait_for_text "$WORK/run.log" "acknowledged it within [checkpoint] timeout" 10
  failed_id=$(grep -Eo "checkpoint [0-9]+ (failed|given up): not every task acknowledged" "$WORK/run.log" |
    tail -1 | awk '{print $2}' || true)
  [[ -n $failed_id ]] || fail "no checkpoint failed in the log: $(grep -Ei "checkpoint|rescale" "$WORK/run.log" | tail -8)"
  if grep -Eq "count_per_key[^:]*: debug: checkpoint $failed_id: state taken" "$WORK/run.log"; then
    taken=1
    break
  fi
  echo "try $try: the window's worker took no snapshot of the failed checkpoint $failed_id; again"
  sleep 0.5
done
((taken)) || fail "in 3 failed rescales the window's worker never took a snapshot of the failed checkpoint"
kill -0 $job 2>/dev/null || fail "the job ended after a failed rescale"
assert_eq "$window" "$(pid_of failed count_per_key 0)" "the window's worker after the failed rescale"
# The window's worker took the failed checkpoint's snapshot; it must have gone on since.
sleep 1

run_expect 0 "$STREAMCTL" rescale failed --parallelism 2
grep "kept .* key group(s) in memory" "$WORK/run.log" | tail -1 | grep -q ": 2 worker(s) kept" ||
  fail "the rescale after a failed one kept not 2 workers: $(grep 'in memory' "$WORK/run.log" | tail -1)"
assert_eq "$window" "$(pid_of failed count_per_key 0)" "the window's worker kept by the second rescale"

set +e; wait $job; code=$?; set -e
assert_eq 0 "$code" "exit code of the job after a failed and a kept rescale"
assert_same_output "$WORK/committed" "a job rescaled after a failed rescale wrote other output"
verify_checkpoints "$WORK/ck/failed"
assert_no_processes_left
echo ok
