# The README's checkpoint walkthrough, as written there, on examples/live_page_views.toml: run
# detached, savepoint, rescale, stop, go on from the stop's savepoint, stop again. Every
# window that came out holds all 6000 records of its minute once (1000 records/s at 10 ms of
# event time each), and the windows follow each other without a gap or a repeat.
source "$(dirname "$0")/lib/common.bash"

example="$SOURCE_DIR/examples/live_page_views.toml"
first=$("$STREAMCTL" run "$example" --detach)
wait_for_lines "$STREAMCTL_STATE_DIR/jobs/$first/stdout" 20 60
run_expect 0 "$STREAMCTL" savepoint "$first"
[[ -d $(cat "$WORK/out") ]] || fail "savepoint printed '$(cat "$WORK/out")', not a directory"
run_expect 0 "$STREAMCTL" rescale "$first" --parallelism 2
lines=$(wc -l <"$STREAMCTL_STATE_DIR/jobs/$first/stdout")
wait_for_lines "$STREAMCTL_STATE_DIR/jobs/$first/stdout" $((lines + 20)) 60 # windows after the rescale
coordinator=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["coordinator_pid"])' \
  "$STREAMCTL_STATE_DIR/jobs/$first/job.json")
run_expect 0 "$STREAMCTL" stop "$first"
# stop returns when the job has ended, so the next run finds its lock free.
if kill -0 "$coordinator" 2>/dev/null && [[ $(awk '{print $3}' "/proc/$coordinator/stat" 2>/dev/null) != Z ]]; then
  fail "stop returned while the job's coordinator (pid $coordinator) still runs"
fi
stopped_at=$(cat "$WORK/out")
[[ -d $stopped_at ]] || fail "stop printed '$stopped_at', not a directory"

second=$("$STREAMCTL" run "$example" --from-savepoint "$stopped_at" --detach)
wait_for_lines "$STREAMCTL_STATE_DIR/jobs/$second/stdout" 20 60
run_expect 0 "$STREAMCTL" stop "$second"

cat "$STREAMCTL_STATE_DIR/jobs/$first/stdout" "$STREAMCTL_STATE_DIR/jobs/$second/stdout" >"$WORK/all"
python3 - "$WORK/all" <<'PY' || fail "the windows of the two runs are not every record once"
import collections, json, sys
views = collections.Counter()
for line in open(sys.argv[1]):
    record = json.loads(line)
    views[record["window_start"]] += record["views"]
starts = sorted(views)
bad = {s: v for s, v in views.items() if v != 6000}
gaps = [s for a, s in zip(starts, starts[1:]) if s - a != 60000]
print(f"{len(starts)} windows from {starts[0]} to {starts[-1]}")
if bad or gaps or starts[0] != 0:
    sys.exit(f"windows with other than 6000 views: {bad}; gaps before: {gaps}; first: {starts[0]}")
PY
assert_no_processes_left
echo ok
