# A cron job over growing input (SPEC §7): `run --resume` on a schedule gives, across all runs
# together, the same output as one run over all the input. Three runs over a file that grows
# between them: the first two end with a savepoint (--savepoint-on-exit), so their open windows,
# dedup and reduce state and the source's offset wait for the next --resume; the last drains.
# The union of what the runs committed must equal one plain run over the whole file: no record
# read twice, none lost, and a window that spans the boundary between two runs' input counted
# once, in full. A --resume with nothing to resume starts fresh.
source "$(dirname "$0")/lib/common.bash"

# pipeline NAME INPUT OUT: input -> dedup by id -> (tumbling count per user, running count per
# user) -> one file sink. The source has one subtask, so its watermark is that of all the input
# and windows the input has passed fire in the run that passes them; the keyed operators have
# two subtasks, so state goes across the keyed exchange and back from the savepoint.
pipeline() {
  cat <<TOML
name = "$1"
parallelism = 2
[sources.in]
type = "file"
path = "$2"
event_time = "ts"
parallelism = 1
watermark = { max_delay = "2s" }
[operators.once]
type = "dedup"
inputs = ["in"]
key = ["id"]
within = "10m"
[operators.per_user]
type = "window"
inputs = ["once"]
key = ["user"]
window = { kind = "tumbling", size = "10s" }
aggregates = { n = "count()", total = "sum(v)" }
[operators.running]
type = "reduce"
inputs = ["once"]
key = ["user"]
aggregates = { seen = "count()" }
[sinks.out]
type = "file"
inputs = ["per_user", "running"]
path = "$3"
TOML
}

# The whole input, deterministic: 3000 events a few hundred ms apart, slightly out of order
# (within max_delay), with re-sent duplicates (same id, a little later). At each cut between
# runs, user "edge" has events just before and just after it, in one 10 s window, and an
# event is re-sent across the cut (the dedup must remember it).
python3 - "$WORK" <<'PY'
import json, random, sys
random.seed(20240601)
work = sys.argv[1]
events = []
t = 1_700_000_000_000
for i in range(3000):
    t += random.randint(50, 400)
    events.append({"ts": t + random.randint(-1500, 0), "id": "e%d" % i,
                   "user": "u%d" % random.randint(1, 40), "v": random.randint(1, 100)})
    if random.random() < 0.05:  # re-sent a little later: a duplicate
        dup = dict(events[-1]); dup["v"] = 999_999
        events.append(dup)
cuts = [len(events) // 3, 2 * len(events) // 3]
window = 10_000
bounds = []
for c in reversed(cuts):  # the later cut first, so that the earlier one's index holds
    # In the 10 s window of the last event before the cut: two events of "edge" before the
    # cut and one after it, plus one of the two re-sent after it (a duplicate across the cut).
    # The watermark at the cut is at most 1.5 s past that last event minus max_delay, so the
    # window is still open there, and none of these events is late.
    before = events[c - 1]["ts"]
    mid = before - before % window + window // 2
    events[c:c] = [{"ts": mid - 20, "id": "edge-%d-a" % c, "user": "edge", "v": 1},
                   {"ts": mid - 10, "id": "edge-%d-b" % c, "user": "edge", "v": 2},
                   {"ts": mid + 10, "id": "edge-%d-c" % c, "user": "edge", "v": 4},
                   {"ts": mid - 10, "id": "edge-%d-b" % c, "user": "edge", "v": 999_999}]
    bounds = [c + 2] + [b + 4 for b in bounds]
lines = [json.dumps(e, separators=(",", ":")) for e in events]
parts = [lines[:bounds[0]], lines[bounds[0]:bounds[1]], lines[bounds[1]:]]
for n, p in enumerate(parts, 1):
    open("%s/part%d.jsonl" % (work, n), "w").write("\n".join(p) + "\n")
open("%s/all.jsonl" % work, "w").write("\n".join(lines) + "\n")
PY
cat "$WORK"/part{1,2,3}.jsonl | cmp -s - "$WORK/all.jsonl" || fail "the three parts do not make up the input"

# The reference: one plain run over all the input.
pipeline cron "$WORK/all.jsonl" "$WORK/expected" >"$WORK/reference.toml"
run_expect 0 "$STREAMCTL" run "$WORK/reference.toml" --set name=reference
cat "$WORK/expected"/part-* | canonical >"$WORK/expected.txt"
[[ $(wc -l <"$WORK/expected.txt") -gt 3000 ]] || fail "the reference run wrote too little"
# Each boundary window of "edge" holds 3 events (the re-sent one dropped), v 1+2+4.
assert_eq 2 "$(grep -c '"n": 3, "total": 7, "user": "edge"' "$WORK/expected.txt")" \
  "edge windows in the reference output"

# The cron job: its pipeline reads $WORK/in.jsonl, which grows between runs.
pipeline cron "$WORK/in.jsonl" "$WORK/got" >"$WORK/cron.toml"
ck="$STREAMCTL_STATE_DIR/checkpoints/cron"

# Run 1: nothing to resume yet, so it starts fresh; it ends with a savepoint.
cp "$WORK/part1.jsonl" "$WORK/in.jsonl"
run_expect 0 "$STREAMCTL" -v run "$WORK/cron.toml" --resume --savepoint-on-exit
cp "$WORK/err" "$WORK/run1.log"
assert_contains "$WORK/run1.log" "nothing to resume in $ck: starting fresh"
assert_contains "$WORK/run1.log" "taking a savepoint instead of draining"
grep -q "stopped with savepoint $ck/savepoint-" "$WORK/run1.log" || fail "run 1 did not end with a savepoint in $ck: $(cat "$WORK/run1.log")"
savepoint1=$(sed -n "s|.*stopped with savepoint \($ck/savepoint-[^ ]*\).*|\1|p" "$WORK/run1.log")
[[ -f $savepoint1/_metadata ]] || fail "no _metadata in the savepoint of run 1 ($savepoint1)"
assert_no_processes_left
# What run 1 committed is final output: every record of it is in the reference, and the edge
# window, open at the end of its input, is not among it.
cat "$WORK/got"/part-* 2>/dev/null | canonical >"$WORK/after1.txt" || true
extra=$(comm -23 "$WORK/after1.txt" "$WORK/expected.txt" | head -5)
[[ -z $extra ]] || fail "run 1 committed records that one run over all the input does not write: $extra"
if grep -q '"n": [0-9]*, "total": [0-9]*, "user": "edge"' "$WORK/after1.txt"; then
  fail "run 1 fired the edge window that was still open at the end of its input: $(grep '"user": "edge"' "$WORK/after1.txt")"
fi

# Run 2: more input; it resumes from run 1's savepoint (open windows, dedup, offsets) and ends
# with a savepoint of its own.
cat "$WORK/part2.jsonl" >>"$WORK/in.jsonl"
run_expect 0 "$STREAMCTL" -v run "$WORK/cron.toml" --resume --savepoint-on-exit
cp "$WORK/err" "$WORK/run2.log"
assert_contains "$WORK/run2.log" "resuming from $savepoint1"
assert_contains "$WORK/run2.log" "restored from $savepoint1"
grep -q "stopped with savepoint $ck/savepoint-" "$WORK/run2.log" || fail "run 2 did not end with a savepoint: $(cat "$WORK/run2.log")"
savepoint2=$(sed -n "s|.*stopped with savepoint \($ck/savepoint-[^ ]*\).*|\1|p" "$WORK/run2.log")
[[ $savepoint2 != "$savepoint1" ]] || fail "run 2 ended with the savepoint it resumed from"
assert_no_processes_left
cat "$WORK/got"/part-* 2>/dev/null | canonical >"$WORK/after2.txt" || true
extra=$(comm -23 "$WORK/after2.txt" "$WORK/expected.txt" | head -5)
[[ -z $extra ]] || fail "after run 2 the output holds records that one run over all the input does not write: $extra"
# The first edge window closed during run 2: it is committed now, once and in full.
assert_eq 1 "$(grep -c '"n": [0-9]*, "total": [0-9]*, "user": "edge"' "$WORK/after2.txt")" "edge windows after run 2"
assert_contains "$WORK/after2.txt" '"n": 3, "total": 7, "user": "edge"'

# Run 3: the rest of the input; it resumes from run 2's savepoint and drains (every window fires).
cat "$WORK/part3.jsonl" >>"$WORK/in.jsonl"
run_expect 0 "$STREAMCTL" -v run "$WORK/cron.toml" --resume
cp "$WORK/err" "$WORK/run3.log"
assert_contains "$WORK/run3.log" "resuming from $savepoint2"
if grep -q "taking a savepoint instead of draining" "$WORK/run3.log"; then
  fail "run 3, without --savepoint-on-exit, did not drain"
fi
assert_no_processes_left

# All runs together: the output of one run over all the input, as a multiset.
cat "$WORK/got"/part-* | canonical >"$WORK/got.txt"
if ! cmp -s "$WORK/expected.txt" "$WORK/got.txt"; then
  echo "--- diff expected got (first lines):" >&2
  diff "$WORK/expected.txt" "$WORK/got.txt" | head -20 >&2
  fail "three --resume runs over growing input wrote other output than one run over all of it"
fi
# The windows open at the cuts: each once, in full (3 events: the re-sent one deduplicated
# across the cut).
assert_eq 2 "$(grep -c '"user": "edge"' <(grep '"window_start"' "$WORK/got.txt"))" "edge windows written"
assert_eq 2 "$(grep -c '"n": 3, "total": 7, "user": "edge"' "$WORK/got.txt")" "full edge windows written"

# --resume of a job name with nothing to resume (other names have savepoints in the same
# checkpoint root): a fresh start, exit 0, the same output as a plain run.
pipeline fresh "$WORK/all.jsonl" "$WORK/fresh" >"$WORK/fresh.toml"
run_expect 0 "$STREAMCTL" -v run "$WORK/fresh.toml" --resume
assert_contains "$WORK/err" "nothing to resume in $STREAMCTL_STATE_DIR/checkpoints/fresh: starting fresh"
if grep -q "resuming from" "$WORK/err"; then fail "a job with nothing to resume resumed: $(cat "$WORK/err")"; fi
cat "$WORK/fresh"/part-* | canonical >"$WORK/fresh.txt"
cmp -s "$WORK/expected.txt" "$WORK/fresh.txt" || fail "a --resume with nothing to resume wrote other output than a plain run"
assert_no_processes_left
echo ok
