# A savepoint whose _metadata was damaged or edited is refused, by `snapshot verify` and by
# every way of restoring it (run --from-savepoint, run --resume, restart), with exit 3 and a
# message naming _metadata and what is wrong; nothing starts (issue 7, finding 2: a _metadata
# listing fewer tasks than a chain's parallelism was restored, exit 0: a source subtask left
# out read its input again from the start, a keyed one lost its key groups; a duplicated
# entry, subtask = 4294967296 and kind = "bogus" were accepted too).
#
# Each edit is tried twice: as is, on the version-2 file (its checksum line no longer matches),
# and on the file turned into version 1 (no checksum line, which version 1 does not have), so
# that the check of what the entries say is tested too, not only the checksum. Then random
# byte flips anywhere in _metadata; SNAPSHOT_EDIT_SEED and SNAPSHOT_EDIT_FLIPS replay or widen
# them.
source "$(dirname "$0")/lib/common.bash"

seed=${SNAPSHOT_EDIT_SEED:-$RANDOM}
flips=${SNAPSHOT_EDIT_FLIPS:-12}
echo "seed $seed, $flips flips (SNAPSHOT_EDIT_SEED=$seed SNAPSHOT_EDIT_FLIPS=$flips to replay)"

# pipeline NAME OUT: a generator and a map fused at parallelism 2 (the source chain) -> keyed
# reduce and file sink fused at parallelism 3 (the keyed chain).
pipeline() {
  cat <<TOML
name = "$1"
parallelism = 3
[checkpoint]
dir = "$WORK/ck"
[sources.gen]
type = "generator"
profile = "counter"
count = 6000
rate = 0
event_time = "ts"
parallelism = 2
[operators.keyed]
type = "map"
inputs = ["gen"]
set = { k = "seq % 37" }
parallelism = 2
[operators.per_key]
type = "reduce"
inputs = ["keyed"]
key = ["k"]
aggregates = { n = "count()", s = "sum(seq)" }
[sinks.out]
type = "file"
inputs = ["per_key"]
path = "$2"
TOML
}

# The reference: one run over all the input.
pipeline edits "$WORK/expected" >"$WORK/edits.toml"
run_expect 0 "$STREAMCTL" run "$WORK/edits.toml"
# final DIR: per key, its last update (the largest count), and the number of updates: the
# order of updates depends on how the two source subtasks interleave, these do not.
final() {
  cat "$1"/part-* | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
last = {}
for r in rows:
    if r["k"] not in last or r["n"] > last[r["k"]]["n"]:
        last[r["k"]] = r
print(len(rows), "updates")
for k in sorted(last):
    print(json.dumps(last[k], sort_keys=True))'
}
final "$WORK/expected" >"$WORK/expected.txt"
assert_eq "6000 updates" "$(head -1 "$WORK/expected.txt")" "updates of the reference run"

# The savepoint: a run that ends with one instead of draining.
pipeline edits "$WORK/committed" >"$WORK/edits.toml"
run_expect 0 "$STREAMCTL" -v run "$WORK/edits.toml" --savepoint-on-exit
savepoint=$(sed -n 's|.*stopped with savepoint \(/[^ ]*\).*|\1|p' "$WORK/err")
[[ -n $savepoint && -f $savepoint/_metadata ]] || fail "no savepoint from run --savepoint-on-exit: $(cat "$WORK/err")"
job=$(sed -n 's|.*job \([^ ]*\) stopped with savepoint.*|\1|p' "$WORK/err")
cp -a "$savepoint" "$WORK/pristine"
grep -q '^version = 2$' "$WORK/pristine/_metadata" || fail "the savepoint's _metadata is not version 2: $(cat "$WORK/pristine/_metadata")"
tail -1 "$WORK/pristine/_metadata" | grep -qE '^checksum = "[0-9a-f]{16}"$' ||
  fail "the savepoint's _metadata does not end with its checksum line: $(tail -2 "$WORK/pristine/_metadata")"
run_expect 0 "$STREAMCTL" snapshot verify "$WORK/pristine"
assert_contains "$WORK/out" "_metadata: ok (version 2, 2 chains, 5 tasks, every subtask once)"
assert_no_processes_left
jobs_known=$(ls "$STREAMCTL_STATE_DIR/jobs" | wc -l)

# edit MODE DIR [v1]: applies MODE to DIR/_metadata; with v1, also turns it into version 1
# (checksum line and `chains` removed), else keeps the old checksum line, which then fails.
edit() {
  python3 - "$@" <<'PY'
import re, sys
mode, d = sys.argv[1], sys.argv[2]
v1 = len(sys.argv) > 3
path = d + "/_metadata"
text = open(path).read()
lines = text.split("\n")
assert lines[-1] == "" and lines[-2].startswith("checksum = "), "no checksum line"
checksum = lines[-2]
body = "\n".join(lines[:-2]) + "\n"
head, *tasks = body.split("\n[[tasks]]\n")
def find(node, subtask):
    for k, t in enumerate(tasks):
        if re.search(r"^nodes = \[ '%s'" % node, t, re.M) and re.search(r"^subtask = %d$" % subtask, t, re.M):
            return k
    sys.exit("no task of %s subtask %d in %s" % (node, subtask, body))
if mode == "drop-source":
    del tasks[find("gen", 1)]
elif mode == "drop-keyed":
    del tasks[find("per_key", 0)]
elif mode == "duplicate":
    k = find("per_key", 2)
    tasks.insert(k, tasks[k])
elif mode == "wrap":
    k = find("gen", 0)
    tasks[k] = re.sub(r"^subtask = 0$", "subtask = 4294967296", tasks[k], flags=re.M)
elif mode == "kind":
    head = re.sub(r"^kind = .*$", "kind = 'bogus'", head, flags=re.M)
elif mode == "bytes":
    k = find("per_key", 1)
    tasks[k] = re.sub(r"^bytes = (\d+)$", lambda m: "bytes = %d" % (int(m.group(1)) + 1), tasks[k], flags=re.M)
elif mode != "none":
    sys.exit("unknown mode " + mode)
body = "\n[[tasks]]\n".join([head] + tasks)
if v1:
    body = re.sub(r"^version = 2$", "version = 1", body, flags=re.M)
    body = re.sub(r"^chains = \d+\n", "", body, flags=re.M)
    open(path, "w").write(body)
else:
    open(path, "w").write(body + checksum + "\n")
PY
}

# restore_dir NAME: a copy of what the savepoint's run committed, for a restore to write into.
restore_dir() {
  rm -rf "$WORK/out-$1"
  cp -a "$WORK/committed" "$WORK/out-$1"
  echo "$WORK/out-$1"
}

# assert_refused NAME DIR TEXT: verify and --from-savepoint refuse DIR with exit 3, naming its
# _metadata or a file of it and saying TEXT; the restore started nothing and wrote nothing.
assert_refused() {
  local name=$1 dir=$2 text=$3 out
  run_expect 3 "$STREAMCTL" snapshot verify "$dir"
  assert_contains "$WORK/err" "$dir/"
  assert_contains "$WORK/err" "$text"
  out=$(restore_dir "$name")
  run_expect 3 "$STREAMCTL" run "$WORK/edits.toml" --from-savepoint "$dir" --set sinks.out.path="$out"
  assert_contains "$WORK/err" "$dir/"
  assert_contains "$WORK/err" "$text"
  diff -r "$WORK/committed" "$out" >/dev/null || fail "$name: the refused restore wrote output"
  assert_eq "$jobs_known" "$(ls "$STREAMCTL_STATE_DIR/jobs" | wc -l)" "$name: jobs after a refused restore"
  assert_no_processes_left
}

# The controls: the savepoint unchanged, and turned into version 1 without other change,
# restore (so the refusals below are for the edits, not for the editing).
cp -a "$WORK/pristine" "$WORK/same-v1"
edit none "$WORK/same-v1" v1
run_expect 0 "$STREAMCTL" snapshot verify "$WORK/same-v1"
assert_contains "$WORK/out" "_metadata: ok (version 1, 2 chains, 5 tasks"
for from in pristine same-v1; do
  out=$(restore_dir "$from")
  run_expect 0 "$STREAMCTL" run "$WORK/edits.toml" --from-savepoint "$WORK/$from" --set sinks.out.path="$out"
  final "$out" >"$WORK/$from.txt"
  cmp -s "$WORK/expected.txt" "$WORK/$from.txt" ||
    fail "savepoint run + restore from $from differs from one run: $(diff "$WORK/expected.txt" "$WORK/$from.txt" | head -5)"
done
jobs_known=$(ls "$STREAMCTL_STATE_DIR/jobs" | wc -l)

# mode | what the version-1 refusal says
while IFS='|' read -r mode says; do
  cp -a "$WORK/pristine" "$WORK/$mode-v2"
  edit "$mode" "$WORK/$mode-v2"
  assert_refused "$mode-v2" "$WORK/$mode-v2" "checksum mismatch"
  cp -a "$WORK/pristine" "$WORK/$mode-v1"
  edit "$mode" "$WORK/$mode-v1" v1
  assert_refused "$mode-v1" "$WORK/$mode-v1" "$says"
done <<'EDITS'
drop-source|chain 'gen -> keyed' has parallelism 2 but no entry for subtask 1
drop-keyed|chain 'per_key -> out' has parallelism 3 but no entry for subtask 0
duplicate|is listed twice
wrap|subtask 4294967296 is not within 0..1
kind|kind is 'bogus', not 'checkpoint' or 'savepoint'
bytes|bytes, but _metadata says
EDITS

# Random byte flips anywhere in _metadata: each refused, whatever it hit.
python3 - "$WORK/pristine/_metadata" "$seed" "$flips" >"$WORK/flips" <<'PY'
import random, sys
size = len(open(sys.argv[1], "rb").read())
rng = random.Random(int(sys.argv[2]))
for _ in range(int(sys.argv[3])):
    print(rng.randrange(size), rng.randrange(1, 256))
PY
while read -r offset mask; do
  cp -a "$WORK/pristine" "$WORK/flip-$offset"
  python3 - "$WORK/flip-$offset/_metadata" "$offset" "$mask" <<'PY'
import sys
data = bytearray(open(sys.argv[1], "rb").read())
data[int(sys.argv[2])] ^= int(sys.argv[3])
open(sys.argv[1], "wb").write(data)
PY
  echo "flip of byte $offset by $mask"
  assert_refused "flip-$offset" "$WORK/flip-$offset" "_metadata"
done <"$WORK/flips"

# A damaged snapshot that was there when a run of the job drained its input is not in the way
# of --resume: that run published everything after it, and the resume starts over.
edit kind "$savepoint"
rm -rf "$WORK/out-over"
run_expect 0 "$STREAMCTL" run "$WORK/edits.toml" --resume --set sinks.out.path="$WORK/out-over"
final "$WORK/out-over" >"$WORK/over.txt"
cmp -s "$WORK/expected.txt" "$WORK/over.txt" ||
  fail "a resume after a drained run did not start over: $(diff "$WORK/expected.txt" "$WORK/over.txt" | head -5)"

# --resume and restart take the newest snapshot of the job: a damaged one is refused, not
# skipped for an older one (which would publish again what was published after it). Ordered by
# id, not by the time its _metadata was last written: a savepoint newer than the drain.
run_expect 0 "$STREAMCTL" -v run "$WORK/edits.toml" --savepoint-on-exit --set sinks.out.path="$WORK/committed-second"
savepoint=$(sed -n 's|.*stopped with savepoint \(/[^ ]*\).*|\1|p' "$WORK/err")
[[ -n $savepoint && -f $savepoint/_metadata ]] || fail "no second savepoint: $(cat "$WORK/err")"
job=$(sed -n 's|.*job \([^ ]*\) stopped with savepoint.*|\1|p' "$WORK/err")
edit kind "$savepoint"
out=$(restore_dir resume)
run_expect 3 "$STREAMCTL" run "$WORK/edits.toml" --resume --set sinks.out.path="$out"
assert_contains "$WORK/err" "$savepoint/_metadata"
assert_contains "$WORK/err" "checksum mismatch"
run_expect 3 "$STREAMCTL" restart "$job"
assert_contains "$WORK/err" "$savepoint/_metadata"
assert_contains "$WORK/err" "checksum mismatch"
assert_no_processes_left
echo ok
