# Shared by the exactly-once tests under failure (checkpoint_kill, checkpoint_fork,
# checkpoint_incremental, checkpoint_entry_deltas): a reference run without failures, outputs
# compared with it as multisets of records, workers killed at random, and what is left of the
# checkpoints verified. Source after lib/common.bash.

# run_reference TOML OUT_DIR MIN_LINES: runs the job once as fast as it goes and without
# checkpoints, and keeps its output, canonical, in $WORK/expected.txt (more than MIN_LINES).
run_reference() {
  run_expect 0 "$STREAMCTL" run "$1" --set sources.gen.rate=0 --set checkpoint.interval=0
  cat "$2"/part-* | canonical >"$WORK/expected.txt"
  [[ $(wc -l <"$WORK/expected.txt") -gt $3 ]] || fail "the reference run wrote too little"
}

# assert_same_output OUT_DIR WHAT: the records in OUT_DIR's part files are those of
# $WORK/expected.txt, each as often; else the first differences, and WHAT as the failure.
assert_same_output() {
  local got
  got="$WORK/$(basename "$1").txt"
  cat "$1"/part-* | canonical >"$got"
  if ! cmp -s "$WORK/expected.txt" "$got"; then
    diff "$WORK/expected.txt" "$got" | head -20 >&2
    fail "$2"
  fi
}

# kill_workers_while PID MAX [BEFORE_EACH]: while the job PID runs, kill -9 a random worker
# every 0.3-0.8 s (drawn with $RANDOM, so a seeded test repeats itself), MAX times at most;
# runs the command BEFORE_EACH before each kill. Leaves the number of kills in KILLS.
kill_workers_while() {
  KILLS=0
  while kill -0 "$1" 2>/dev/null && ((KILLS < $2)); do
    sleep "0.$((RANDOM % 5 + 3))"
    if [[ -n ${3:-} ]]; then $3; fi
    if kill_worker; then KILLS=$((KILLS + 1)); fi
  done
}

# verify_checkpoints DIR: every checkpoint left in DIR (a job's checkpoint directory) whose
# _metadata was written verifies, with the earlier files it builds on.
verify_checkpoints() {
  local chk
  for chk in "$1"/chk-*; do
    [[ -f $chk/_metadata ]] || continue
    run_expect 0 "$STREAMCTL" snapshot verify "$chk"
  done
}

# run_with_kills TOML LOG MAX [early]: runs the job (-v, its log in LOG) in the background and,
# once records flow, kills workers with kill_workers_while, MAX times at most; with `early`,
# first one worker at once (before any checkpoint) on half the draws. Waits for the job and
# leaves its exit code in CODE, its restarts in RESTARTS, the kills in KILLS (the early one
# included) and EARLY_KILLS (0 or 1).
run_with_kills() {
  "$STREAMCTL" -v run "$1" 2>"$2" &
  local pid=$!
  wait_for_text "$2" "records flowing"
  EARLY_KILLS=0
  if [[ ${4:-} == early ]] && ((RANDOM % 2 == 0)) && kill_worker; then EARLY_KILLS=1; fi
  kill_workers_while $pid "$3"
  KILLS=$((KILLS + EARLY_KILLS))
  set +e; wait $pid; CODE=$?; set -e
  RESTARTS=$(grep -c "restarting the job" "$2" || true)
}
