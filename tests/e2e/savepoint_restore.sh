# Savepoints restore at any parallelism (SPEC §7): a job stopped with a savepoint and
# restored at parallelism 1, 3 and 8 commits, together with what it committed before the
# stop, exactly what an uninterrupted run commits; keyed state is redistributed by key group
# and sources go on where they stopped. `rescale` does the same to a running job, up and down.
source "$(dirname "$0")/lib/common.bash"

pipeline() { # NAME OUT
  cat <<TOML
name = "$1"
parallelism = 2
[checkpoint]
interval = "300ms"
dir = "$WORK/ck"
[sources.gen]
type = "generator"
profile = "counter"
count = 40000
rate = 10000
event_time = "ts"
[operators.keyed]
type = "map"
inputs = ["gen"]
set = { k = "seq % 53" }
[operators.count_per_key]
type = "window"
inputs = ["keyed"]
key = ["k"]
window = { kind = "tumbling", size = "300ms" }
aggregates = { n = "count()", s = "sum(seq)" }
[operators.updates]
type = "reduce"
inputs = ["keyed"]
key = ["k"]
aggregates = { updates = "count()" }
[sinks.out]
type = "file"
inputs = ["count_per_key", "updates"]
path = "$2"
TOML
}
committed() { cat "$1"/part-* | canonical; }

pipeline reference "$WORK/expected" >"$WORK/reference.toml"
run_expect 0 "$STREAMCTL" run "$WORK/reference.toml" --set sources.gen.rate=0 --set checkpoint.interval=0
committed "$WORK/expected" >"$WORK/expected.txt"

# Stop with a savepoint half-way.
pipeline stopped "$WORK/before" >"$WORK/stopped.toml"
"$STREAMCTL" -v run "$WORK/stopped.toml" --set sources.gen.rate=4000 2>"$WORK/run.log" &
pid=$!
wait_for_text "$WORK/run.log" "records flowing"
sleep 1
run_expect 0 "$STREAMCTL" stop stopped
savepoint=$(cat "$WORK/out")
[[ -f $savepoint/_metadata ]] || fail "stop printed '$savepoint', not a savepoint"
set +e; wait $pid; code=$?; set -e
assert_eq 0 "$code" "exit code of a job stopped with a savepoint"
before=$(cat "$WORK/before"/part-* | wc -l)
[[ $before -gt 0 && $before -lt $(wc -l <"$WORK/expected.txt") ]] || fail "the stop committed $before records: not half-way"
run_expect 0 "$STREAMCTL" snapshot verify "$savepoint"

# Restore at 1, 3 and 8: each into a copy of what the stopped job committed (the savepoint's
# pending output is published there), the last from a moved savepoint (it is relocatable).
for p in 1 3 8; do
  cp -a "$WORK/before" "$WORK/after-$p"
  from=$savepoint
  if [[ $p == 8 ]]; then
    cp -a "$savepoint" "$WORK/moved-savepoint"
    from="$WORK/moved-savepoint"
  fi
  run_expect 0 "$STREAMCTL" run "$WORK/stopped.toml" --from-savepoint "$from" -p $p \
    --set sources.gen.rate=0 --set sinks.out.path="$WORK/after-$p"
  committed "$WORK/after-$p" >"$WORK/got-$p.txt"
  if ! cmp -s "$WORK/expected.txt" "$WORK/got-$p.txt"; then
    diff "$WORK/expected.txt" "$WORK/got-$p.txt" | head -10 >&2
    fail "stop at parallelism 2 and restore at $p differs from the uninterrupted run"
  fi
done

# Rescale a running job up, then one node down, then stop it with a savepoint and let a run
# from that savepoint finish at full speed. At 1000 records a second the input would last 40 s,
# so the job is still running for every command, however slow the machine (sanitizers).
pipeline rescaled "$WORK/rescaled" >"$WORK/rescaled.toml"
"$STREAMCTL" -v run "$WORK/rescaled.toml" --set sources.gen.rate=1000 2>"$WORK/rescale.log" &
pid=$!
wait_for_text "$WORK/rescale.log" "records flowing"
sleep 0.7
run_expect 0 "$STREAMCTL" rescale rescaled --parallelism 4
assert_contains "$WORK/err" "gen=4"
# The job takes periodic checkpoints: the rescale's snapshot is one of them (incremental), not
# a savepoint, and its path is printed.
grep -Eq '/ck/rescaled/chk-[0-9]+$' "$WORK/out" || fail "the rescale did not print the checkpoint it took: $(cat "$WORK/out")"
assert_contains "$WORK/rescale.log" "taking a checkpoint, then restarting"
run_expect 0 "$STREAMCTL" status rescaled --json
assert_contains "$WORK/out" '"name":"count_per_key","type":"window","parallelism":4'
sleep 0.7
run_expect 0 "$STREAMCTL" rescale rescaled --operator count_per_key=1
assert_contains "$WORK/err" "count_per_key=1"
run_expect 2 "$STREAMCTL" rescale rescaled --operator nosuchnode=2
assert_contains "$WORK/err" "no node 'nosuchnode'"
run_expect 2 "$STREAMCTL" rescale rescaled --parallelism 500
assert_contains "$WORK/err" "max_parallelism"
sleep 0.5
run_expect 0 "$STREAMCTL" stop rescaled
last=$(cat "$WORK/out")
set +e; wait $pid; code=$?; set -e
assert_eq 0 "$code" "exit code of a rescaled job stopped with a savepoint"
assert_contains "$WORK/rescale.log" "rescaled in"
run_expect 0 "$STREAMCTL" run "$WORK/rescaled.toml" --from-savepoint "$last" --set sources.gen.rate=0
committed "$WORK/rescaled" >"$WORK/got-rescaled.txt"
cmp -s "$WORK/expected.txt" "$WORK/got-rescaled.txt" || fail "the job rescaled while running wrote other output"
assert_no_processes_left
echo ok
