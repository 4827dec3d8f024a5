# `run --from-savepoint` with incremental checkpoints adopts the savepoint as the job's newest
# checkpoint (chk-S: hard links to its files, pipeline/runtime/savepoint_adoption.hpp), so that
# the first checkpoint after the restore builds on it instead of writing all the state again.
# Under faults: the person deletes the savepoint once the job runs, workers are killed with -9
# before and after the first checkpoint, the coordinator is killed and the job resumed; every
# record is committed exactly once. Where a resume from the savepoint would not be the newest
# snapshot (an older savepoint), or the files cannot be linked (another file system), nothing
# is adopted and the job is restored as before.
source "$(dirname "$0")/lib/common.bash"
source "$(dirname "$0")/lib/exactly_once.bash"

seed_random savepoint_adoption ADOPTION_SEED

pipeline() { # NAME OUT
  cat <<TOML
name = "$1"
parallelism = 2
[checkpoint]
interval = "200ms"
dir = "$WORK/ck"
incremental = true
retain = 100
[restart]
strategy = "fixed"
delay = "50ms"
max_attempts = 100
[sources.gen]
type = "generator"
profile = "counter"
count = 40000
rate = 5000
event_time = "ts"
[operators.keyed]
type = "map"
inputs = ["gen"]
set = { k = "seq % 2000" }
[operators.totals]
type = "window"
inputs = ["keyed"]
key = ["k"]
window = { kind = "tumbling", size = "1h" }
aggregates = { n = "count()", s = "sum(seq)" }
[operators.updates]
type = "reduce"
inputs = ["keyed"]
key = ["k"]
aggregates = { updates = "count()" }
[sinks.out]
type = "file"
inputs = ["totals", "updates"]
path = "$2"
TOML
}

pipeline reference "$WORK/expected" >"$WORK/reference.toml"
run_reference "$WORK/reference.toml" "$WORK/expected" 2000

# 1. A savepoint while the job runs (older), then a stop with a savepoint (the newest).
pipeline adopt "$WORK/before" >"$WORK/adopt.toml"
"$STREAMCTL" -v run "$WORK/adopt.toml" 2>"$WORK/run1.log" &
pid=$!
wait_for_text "$WORK/run1.log" "records flowing"
sleep 1
run_expect 0 "$STREAMCTL" savepoint adopt
older=$(cat "$WORK/out")
sleep 0.5
run_expect 0 "$STREAMCTL" stop adopt
savepoint=$(cat "$WORK/out")
set +e; wait_exit $pid; code=$?; set -e
assert_eq 0 "$code" "exit code of the job stopped with a savepoint"
id=${savepoint##*-}
cp -a "$savepoint" "$WORK/savepoint-copy"
cp -a "$WORK/before" "$WORK/before-copy"

# 2. Restore from it: chk-$id is the savepoint's files, linked.
cp -a "$WORK/before" "$WORK/after"
"$STREAMCTL" -vv run "$WORK/adopt.toml" --from-savepoint "$savepoint" --set sinks.out.path="$WORK/after" \
  2>"$WORK/run2.log" &
pid=$!
wait_for_text "$WORK/run2.log" "records flowing"
assert_contains "$WORK/run2.log" "restored from $savepoint (adopted as chk-$id)"
for file in "$savepoint"/chain-*.snap; do
  [[ $(stat -c %i "$file") == $(stat -c %i "$WORK/ck/adopt/chk-$id/${file##*/}") ]] ||
    fail "chk-$id/${file##*/} is not a hard link to the savepoint's file"
done
# The person deletes the savepoint; the job then loses workers, before its first checkpoint
# completes or after (drawn), and its coordinator, and is resumed.
rm -rf "$savepoint"
if ((RANDOM % 2)); then
  echo "first kill before the first checkpoint"
  kill_worker || fail "no worker to kill"
else
  echo "first kill after the first checkpoint"
  wait_for_file "$WORK/ck/adopt/chk-$((id + 1))/_metadata"
fi
kill_workers_while $pid 3
if kill -0 $pid 2>/dev/null; then
  kill -KILL $pid
  wait $pid || true
  pkill -KILL -f -- "worker --job-dir $STREAMCTL_STATE_DIR" || true
  echo "coordinator killed; resuming"
  run_expect 0 "$STREAMCTL" run "$WORK/adopt.toml" --resume --set sinks.out.path="$WORK/after" --set sources.gen.rate=0
else
  set +e; wait_exit $pid; code=$?; set -e
  assert_eq 0 "$code" "exit code of the restored job"
fi
assert_same_output "$WORK/after" "stopped with a savepoint, adopted, killed and resumed: other output than one run's"
grep -qF "../chk-$id/" "$WORK"/ck/adopt/chk-*/_metadata ||
  fail "no checkpoint after the restore built on the adopted chk-$id"
verify_checkpoints "$WORK/ck/adopt"

# 3. The older savepoint: newer snapshots exist, so it is restored as it is, not adopted.
older_id=${older##*-}
cp -a "$WORK/before" "$WORK/older-out"
run_expect 0 "$STREAMCTL" -vv run "$WORK/adopt.toml" --from-savepoint "$older" --set sources.gen.rate=0 \
  --set sinks.out.path="$WORK/older-out"
assert_contains "$WORK/err" "was not adopted"
[[ ! -e $WORK/ck/adopt/chk-$older_id ]] || fail "the older savepoint was adopted as chk-$older_id"

# 4. A savepoint on another file system cannot be linked: restored as it is, into a job
# directory of its own, with the same output, also through a `restart` after a kill -9.
other_fs=/dev/shm
if [[ -d $other_fs && -w $other_fs && $(stat -c %d "$other_fs") != $(stat -c %d "$WORK") ]]; then
  moved=$(mktemp -d "$other_fs/streamctl-e2e-adoption.XXXXXX")
  # The exit trap's cleanup removes $WORK; this copy is outside it.
  eval "work_$(declare -f cleanup)"
  cleanup() { rm -rf "$moved"; work_cleanup; }
  cp -a "$WORK/savepoint-copy" "$moved/savepoint"
  # Its coordinator killed before any checkpoint (none in the hour): `restart` must go back to
  # that savepoint, which is not in the job's checkpoint directory. It went to the newest
  # snapshot there (none: the beginning), and published everything again, exit 0.
  "$STREAMCTL" -vv run "$WORK/adopt.toml" --from-savepoint "$moved/savepoint" --set checkpoint.interval=1h \
    --set sinks.out.path="$WORK/before-copy" --set checkpoint.dir="$WORK/ck-other" 2>"$WORK/run4.log" &
  pid=$!
  wait_for_text "$WORK/run4.log" "records flowing"
  assert_contains "$WORK/run4.log" "cannot link"
  [[ ! -e $WORK/ck-other/adopt/chk-$id ]] || fail "a savepoint on another file system left chk-$id behind"
  job=$(sed -n 's/.*job \(adopt-[^ ]*\) started.*/\1/p' "$WORK/run4.log" | head -1)
  kill -KILL $pid
  wait $pid || true
  pkill -KILL -f -- "worker --job-dir $STREAMCTL_STATE_DIR" || true
  # The savepoint gone, `restart` and `run --resume` are refused rather than run from an older
  # snapshot; back, either goes on from it (drawn).
  mv "$moved/savepoint" "$moved/away"
  run_expect 3 "$STREAMCTL" restart "$job"
  assert_contains "$WORK/err" "which is gone"
  other=(--set checkpoint.interval=1h --set sinks.out.path="$WORK/before-copy" --set checkpoint.dir="$WORK/ck-other")
  run_expect 3 "$STREAMCTL" run "$WORK/adopt.toml" --resume "${other[@]}"
  assert_contains "$WORK/err" "$moved/savepoint (snapshot $id), which is gone"
  mv "$moved/away" "$moved/savepoint"
  if ((RANDOM % 2)); then
    echo "section 4: restart"
    run_expect 0 "$STREAMCTL" -v restart "$job"
  else
    echo "section 4: run --resume"
    run_expect 0 "$STREAMCTL" -v run "$WORK/adopt.toml" --resume "${other[@]}"
  fi
  assert_contains "$WORK/err" "from $moved/savepoint"
  rm -rf "$moved"
  assert_same_output "$WORK/before-copy" "a savepoint on another file system, not adopted, the coordinator killed: other output"
else
  echo "section 4 skipped: no writable $other_fs on another file system"
fi
assert_no_processes_left
echo ok
