# Rolling wholes ([checkpoint] rolling = true, with incremental checkpoints): a task's
# first checkpoint is full and no later one is; each writes a share of the key groups whole,
# so a chain stays under full_every files and its oldest files leave it (and are pruned).
# Then the newest checkpoint of a job stopped midway restores, by a job that finishes it,
# to the output of a run without a stop: by `restart` of the same job, and by `run --resume`
# (a new run of the same pipeline), twice in a row, each time going on with the chain.
source "$(dirname "$0")/lib/common.bash"
source "$(dirname "$0")/lib/exactly_once.bash"

# Keys spread over every key group of both subtasks and change slowly, so that deltas pay and
# each checkpoint's share of whole groups is what keeps the chain short.
pipeline() { # NAME OUT [KEY_EXPRESSION [RATE [INTERVAL]]]: rate and interval change timing, not output
  cat <<TOML
name = "$1"
parallelism = 2
[checkpoint]
interval = "${5:-100ms}"
dir = "$WORK/ck"
full_every = 3
rolling = true
retain = 1
[sources.gen]
type = "generator"
profile = "counter"
count = 40000
rate = ${4:-10000}
event_time = "ts"
[operators.keyed]
type = "map"
inputs = ["gen"]
set = { k = "${3:-seq % 5000}" }
[operators.counts]
type = "window"
inputs = ["keyed"]
key = ["k"]
window = { kind = "tumbling", size = "1h" }
aggregates = { n = "count()", s = "sum(seq)" }
[sinks.out]
type = "file"
inputs = ["counts"]
path = "$2"
TOML
}

pipeline reference "$WORK/expected" >"$WORK/reference.toml"
run_reference "$WORK/reference.toml" "$WORK/expected" 4000

# 1. While the job runs, note every completed checkpoint's _metadata: only the first may be
# full (version 2, no `previous`), and no `previous` list may reach full_every - 1 + 1 files.
pipeline rolling "$WORK/got" >"$WORK/rolling.toml"
"$STREAMCTL" -v run "$WORK/rolling.toml" 2>"$WORK/run.log" &
pid=$!
wait_for_text "$WORK/run.log" "records flowing"
mkdir "$WORK/seen"
# One process that polls, not a shell loop that forks cp for each file: with retain = 1 a
# checkpoint's directory lives about one interval (100 ms), and on a loaded machine the shell
# loop saw as few as 5 of the 31 checkpoints that the job completed.
python3 - "$WORK/ck/rolling" "$WORK/seen" $pid <<'PY'
import os, sys, time
root, seen, pid = sys.argv[1], sys.argv[2], sys.argv[3]
def running():
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
while running():
    for name in os.listdir(root) if os.path.isdir(root) else []:
        if not name.startswith("chk-") or os.path.exists(os.path.join(seen, name)):
            continue
        try:
            text = open(os.path.join(root, name, "_metadata")).read()
        except (FileNotFoundError, NotADirectoryError):
            continue
        with open(os.path.join(seen, name), "w") as f:
            f.write(text)
    time.sleep(0.005)
PY
set +e; wait $pid; code=$?; set -e
assert_eq 0 "$code" "exit code ($(tail -3 "$WORK/run.log"))"
assert_same_output "$WORK/got" "the output with rolling checkpoints differs from the output without"
python3 - "$WORK/seen" <<'PY' || fail "the checkpoints did not roll (see above)"
import os, re, sys
seen = sorted(os.listdir(sys.argv[1]), key=lambda n: int(n.split("-")[1]))
assert len(seen) >= 8, f"only {len(seen)} checkpoints seen"
first = int(seen[0].split("-")[1])
dropped = False
for name in seen:
    text = open(os.path.join(sys.argv[1], name)).read()
    n = int(name.split("-")[1])
    chains = [re.findall(r"chk-(\d+)/", p) for p in re.findall(r"previous = \[([^\]]*)\]", text)]
    if n > first + 1:
        assert chains, f"{name} is full: only a task's first checkpoint may be"
    for chain in chains:
        assert len(chain) <= 2, f"{name} builds on {len(chain)} files (full_every = 3)"
        if chain and int(min(chain, key=int)) > first:
            dropped = True
assert dropped, "no chain ever left its first, full file"
print(f"{len(seen)} checkpoints seen, chk-{first} the only full one; chains of at most 2 earlier files")
PY
verify_checkpoints "$WORK/ck/rolling"
# Prune keeps only what the retained checkpoint names: no more than full_every directories.
left=$(find "$WORK/ck/rolling" -maxdepth 1 -name 'chk-*' | wc -l)
((left <= 3)) || fail "$left checkpoint directories left, with retain = 1 and full_every = 3"

# 2. Kill the job's coordinator once its chains have rolled, then `restart` it from its newest
# checkpoint (a rolled chain, its first file gone): every task goes on with its chain rather
# than writing a full checkpoint, and the output is the reference's exactly.
pipeline halted "$WORK/halted" >"$WORK/halted.toml"
"$STREAMCTL" -v run "$WORK/halted.toml" 2>"$WORK/halted.log" &
pid=$!
wait_for_text "$WORK/halted.log" "records flowing"
newest() { find "$WORK/ck/halted" -path '*/chk-*/_metadata' 2>/dev/null | sed 's|.*/chk-||; s|/_metadata||' | sort -n | tail -1; }
until [[ $(newest) -ge 7 ]]; do
  kill -0 $pid 2>/dev/null || fail "the job ended before its chain rolled"
  sleep 0.05
done
kill -9 $pid
wait $pid 2>/dev/null || true
assert_no_processes_left
# Every checkpoint from chk-5 on is a rolled chain: incremental, its first file gone.
for m in "$WORK/ck/halted"/chk-*/_metadata; do
  chk=$(dirname "$m")
  (($(basename "$chk" | sed 's/chk-//') >= 5)) || continue
  grep -q "^version = 3" "$m" || { cat "$m" >&2; fail "$(basename "$chk") is not incremental"; }
  if grep -q 'chk-1/' "$m"; then fail "$(basename "$chk") still builds on the first, full checkpoint"; fi
  run_expect 0 "$STREAMCTL" snapshot verify "$chk"
done
id=$(python3 -c 'import json, sys, glob
for p in glob.glob(sys.argv[1] + "/jobs/halted-*/job.json"): print(json.load(open(p))["id"])' "$STREAMCTL_STATE_DIR")
run_expect 0 "$STREAMCTL" -vv restart "$id"
from=$(grep -o 'restarting job .* from .*/chk-[0-9]*' "$WORK/err" | sed 's|.*/chk-||' | head -1)
[[ -n $from ]] || fail "restart named no checkpoint: $(head -c 2000 "$WORK/err")"
((from >= 5)) || fail "restart went back to chk-$from, before the chains rolled"
# Every task went on with the chain it restored: none wrote all its state again.
continued=$(grep -c "checkpoints go on with the chain of chk-$from" "$WORK/err" || true)
assert_eq 4 "$continued" "tasks that went on with their restored chain"
assert_same_output "$WORK/halted" "the output restarted from rolled chain chk-$from differs"
assert_no_processes_left

# 3. kill -9 of a job (coordinator and workers) once its chains have rolled, then `run --resume`:
# a new run, which goes on with the chain it restored. It is killed again after three
# checkpoints of its own (chains now spanning both runs' directories, some of the first run's
# pruned), and a second `run --resume` finishes the job: its output is the reference's
# exactly. (Before, a `--resume` always wrote a full checkpoint first.) At a quarter of the
# rate: under the sanitizers, checkpoints are slower, and at the reference's rate the second run
# once drained its input before its third checkpoint was done (the kill then landed on a job
# that had finished, and the third run rightly started over).
pipeline resumed "$WORK/resumed" "seq % 5000" 2500 >"$WORK/resumed.toml"
newest_resumed() { find "$WORK/ck/resumed" -path '*/chk-*/_metadata' 2>/dev/null | sed 's|.*/chk-||; s|/_metadata||' | sort -n | tail -1; }
kill_job_after() { # PID CHECKPOINT: kill -9 of the coordinator (its workers follow it) once CHECKPOINT completed
  until [[ $(newest_resumed) -ge $2 ]]; do
    kill -0 "$1" 2>/dev/null || fail "the job ended before checkpoint $2"
    sleep 0.05
  done
  kill -9 "$1"
  wait "$1" 2>/dev/null || true
  [[ ! -e $WORK/ck/resumed/drained ]] ||
    fail "the job drained its input before it was killed after checkpoint $2: too little input for this machine"
}
"$STREAMCTL" -v run "$WORK/resumed.toml" 2>"$WORK/resumed-1.log" &
pid=$!
wait_for_text "$WORK/resumed-1.log" "records flowing"
kill_job_after $pid 7
assert_no_processes_left
for round in 2 3; do
  from=$(newest_resumed)
  "$STREAMCTL" -vv run "$WORK/resumed.toml" --resume 2>"$WORK/resumed-$round.log" &
  pid=$!
  wait_for_text "$WORK/resumed-$round.log" "records flowing"
  grep -q "restored from .*/chk-$from" "$WORK/resumed-$round.log" ||
    fail "run $round did not resume from chk-$from: $(grep -m3 -i restor "$WORK/resumed-$round.log")"
  continued=$(grep -c "checkpoints go on with the chain of chk-$from" "$WORK/resumed-$round.log" || true)
  assert_eq 4 "$continued" "tasks of run $round (--resume) that went on with their restored chain"
  if ((round == 2)); then
    kill_job_after $pid $((from + 3))
    assert_no_processes_left
  else
    set +e; wait $pid; code=$?; set -e
    assert_eq 0 "$code" "exit code of the last --resume ($(tail -3 "$WORK/resumed-$round.log"))"
  fi
done
verify_checkpoints "$WORK/ck/resumed"
assert_same_output "$WORK/resumed" "the output of a job resumed twice from rolled chains differs"
assert_no_processes_left

# 4. Few keys, so most key groups are empty: a chain that still begins with its full checkpoint
# (which leaves empty groups out) is gone on with as well. Killed after checkpoint 2 (chk-1
# full, chk-2 a delta on it), then `run --resume` finishes the job. Checkpoints every 600 ms:
# at 100 ms a loaded CI machine once let chk-3 and chk-4 complete between the poll that saw
# chk-2 and the kill, and chk-4's chain no longer held chk-1 (rolled, as it should).
pipeline sparse-reference "$WORK/sparse-expected" "seq % 40" >"$WORK/sparse-reference.toml"
run_reference "$WORK/sparse-reference.toml" "$WORK/sparse-expected" 30
pipeline sparse "$WORK/sparse" "seq % 40" 10000 600ms >"$WORK/sparse.toml"
newest_sparse() { find "$WORK/ck/sparse" -path '*/chk-*/_metadata' 2>/dev/null | sed 's|.*/chk-||; s|/_metadata||' | sort -n | tail -1; }
"$STREAMCTL" -v run "$WORK/sparse.toml" 2>"$WORK/sparse-1.log" &
pid=$!
wait_for_text "$WORK/sparse-1.log" "records flowing"
until [[ $(newest_sparse) -ge 2 ]]; do
  kill -0 "$pid" 2>/dev/null || fail "the sparse job ended before checkpoint 2"
  sleep 0.02
done
kill -9 "$pid"
wait "$pid" 2>/dev/null || true
assert_no_processes_left
from=$(newest_sparse)
grep -q '\.\./chk-1/chain-' "$WORK/ck/sparse/chk-$from/_metadata" ||
  fail "chk-$from does not build on the full chk-1: $(cat "$WORK/ck/sparse/chk-$from/_metadata")"
run_expect 0 "$STREAMCTL" -vv run "$WORK/sparse.toml" --resume
continued=$(grep -c "checkpoints go on with the chain of chk-$from" "$WORK/err" || true)
assert_eq 4 "$continued" "tasks of the sparse job that went on with a chain beginning with its full checkpoint"
assert_same_output "$WORK/sparse" "the output of the sparse job resumed from chk-$from differs"
assert_no_processes_left
echo ok
