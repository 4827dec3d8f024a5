# A rescale keeps the workers whose key groups stay (issue 12, fast rescale): their processes
# go on, with the groups they keep in memory, and read only the rest from the rescale's
# checkpoint. Up and down, the kept workers must be the same processes as before, say how many
# groups they kept, and the committed output must be exactly that of a run without rescales.
# Then the same under kill -9 of a kept worker a random moment after the request: before its
# snapshot, while it is parked, while it takes its new task, or after. Seeded: a failure
# prints the seed to rerun with.
source "$(dirname "$0")/lib/common.bash"
source "$(dirname "$0")/lib/exactly_once.bash"
source "$(dirname "$0")/lib/kept_workers.bash"

seed_random rescale_keep RESCALE_KEEP_SEED

# worker_pids: every running worker of this test's jobs.
worker_pids() {
  pgrep -f -- "worker --job-dir $STREAMCTL_STATE_DIR" | sort || true
}

# Sanitized, the rescales without failures took most of 80,000 records' 13 s, and the job
# often ended before the kill -9 rounds.
records=$([[ ${STREAMCTL_SANITIZED:-0} == 1 ]] && echo 200000 || echo 80000)
kept_workers_pipeline kept "$WORK/committed" $records 6000 >"$WORK/job.toml"
run_reference "$WORK/job.toml" "$WORK/committed" 1000
rm -rf "$WORK/committed" "$WORK/ck"

"$STREAMCTL" -vv run "$WORK/job.toml" 2>"$WORK/run.log" &
job=$!
wait_for_text "$WORK/run.log" "records flowing"

# Without failures: 1 -> 2 -> 1 -> 3 keep a worker of the window and one of the reduce each time.
rounds=0
for parallelism in 2 1 3; do
  before=$(worker_pids)
  kept_before=$(grep -c "kept .* key group(s) in memory" "$WORK/run.log" || true)
  run_expect 0 "$STREAMCTL" rescale kept --parallelism $parallelism
  rounds=$((rounds + 1))
  kept_after=$(grep -c "kept .* key group(s) in memory" "$WORK/run.log" || true)
  ((kept_after == kept_before + 1)) || fail "rescale to $parallelism: no worker said it kept key groups"
  grep "kept .* key group(s) in memory" "$WORK/run.log" | tail -1 | grep -q "^.*: 2 worker(s) kept" ||
    fail "rescale to $parallelism: not 2 workers kept: $(grep 'in memory' "$WORK/run.log" | tail -1)"
  same=$(comm -12 <(echo "$before") <(worker_pids) | wc -l)
  ((same == 2)) || fail "rescale to $parallelism: $same worker processes went on, expected 2 (window, reduce)"
  sleep 0.5
done

# Under failure: kill -9 the window's or the reduce's worker 0-190 ms after each request.
completed=0
refused=0
for round in 1 2 3 4; do
  kill -0 $job 2>/dev/null || break
  node=$([[ $((RANDOM % 2)) == 0 ]] && echo count_per_key || echo running)
  victim=$(pid_of kept $node 0 || true)
  [[ -n $victim ]] || { sleep 0.5; continue; } # restarting: no pid to aim at
  parallelism=$((RANDOM % 3 + 1))
  "$STREAMCTL" rescale kept --parallelism $parallelism >"$WORK/rescale.out" 2>"$WORK/rescale.err" &
  rescale=$!
  sleep "0.$((RANDOM % 20))"
  kill -9 "$victim" 2>/dev/null || true
  set +e; wait_exit $rescale 150; code=$?; set -e
  case $code in
    0) completed=$((completed + 1)) ;;
    1) refused=$((refused + 1)) ;; # the checkpoint failed, or the job was restarting
    # The job read the end of its input after the check above (a sanitized build on a loaded
    # machine gets there within these rounds): the request is refused, or the job ended as it
    # came, and the job's end is checked below.
    2) grep -q -e "is not running (it is finished)" -e "ended before it answered" "$WORK/rescale.err" || {
         cat "$WORK/rescale.err" >&2
         fail "round $round: rescale to $parallelism exited 2"
       }
       break ;;
    *) cat "$WORK/rescale.err" >&2; fail "round $round: rescale to $parallelism exited $code" ;;
  esac
  sleep "0.$((RANDOM % 5 + 3))"
done

set +e; wait $job; code=$?; set -e
assert_eq 0 "$code" "exit code of the job rescaled $rounds times keeping workers, then under kill -9 ($completed completed, $refused failed)"
assert_same_output "$WORK/committed" "a job rescaled keeping workers wrote other output"
verify_checkpoints "$WORK/ck/kept"
assert_no_processes_left
echo "ok: $rounds rescales keeping workers; under kill -9 $completed completed, $refused failed (seed $SEED)"
