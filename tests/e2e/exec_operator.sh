# The exec operator (SPEC §6): real UDFs in Python and awk, through the built binary. Exact
# outputs, fan-out and fan-in, order, a crashing command (the job fails naming the node; with
# [restart] and checkpoints the output is exactly once), garbage output (bad records per
# on_error), a command that never answers (the job fails after `timeout`), one that prints
# far more than it reads (no pipe deadlock), its stderr in the log, and validation.
source "$(dirname "$0")/lib/common.bash"

SEED=${SEED:-$RANDOM}
echo "seed: $SEED (rerun with SEED=$SEED)" >&2
UDF="$SOURCE_DIR/examples/udf"

# pipeline NAME SOURCE_TOML EXEC_EXTRA [SINK_TOML] [TOP]: writes $WORK/NAME.toml, a job whose
# operator `udf` (exec) runs between source `in` and sink `out` (stdout by default).
pipeline() {
  cat >"$WORK/$1.toml" <<TOML
name = "$1"
${5:-}
[sources.in]
$2
[operators.udf]
type = "exec"
inputs = ["in"]
$3
[sinks.out]
inputs = ["udf"]
${4:-type = \"stdout\"}
TOML
}

# --- The examples: exact outputs of the Python and the awk UDF.
printf '{"word":"hello"}\n{"n":1}\n{"word":"exec","id":7}\n' |
  "$STREAMCTL" run "$UDF/python_udf.toml" >"$WORK/py.out"
assert_eq '{"word":"hello","length":5,"upper":"HELLO"}
{"word":"exec","id":7,"length":4,"upper":"EXEC"}' "$(cat "$WORK/py.out")" "python UDF output"
seq 3 | sed 's/.*/{"n": &}/' | "$STREAMCTL" run "$UDF/awk_udf.toml" >"$WORK/awk.out"
assert_eq '{"n":1,"square":1}
{"n":2,"square":4}
{"n":3,"square":9}' "$(cat "$WORK/awk.out")" "awk UDF output"

# --- Fan-out and fan-in: n copies of a record with n (none for n = 0), in order.
cat >"$WORK/copies.py" <<PY
import sys; sys.path.insert(0, "$UDF")
import streamctl_udf
streamctl_udf.run(lambda r: [{"n": r["n"], "copy": k} for k in range(r["n"])])
PY
pipeline copies 'type = "stdin"' "command = [\"python3\", \"$WORK/copies.py\"]"
printf '{"n":2}\n{"n":0}\n{"n":3}\n{"n":0}\n' | "$STREAMCTL" run "$WORK/copies.toml" >"$WORK/copies.out"
assert_eq '{"n":2,"copy":0}
{"n":2,"copy":1}
{"n":3,"copy":0}
{"n":3,"copy":1}
{"n":3,"copy":2}' "$(cat "$WORK/copies.out")" "fan-out output"

# --- `env` reaches the command, beside STREAMCTL_NODE.
cat >"$WORK/env.awk" <<'AWK'
/^$/ { print ""; fflush(); next }
{ printf "{\"tag\":\"%s\",\"node\":\"%s\"}\n", ENVIRON["TAG"], ENVIRON["STREAMCTL_NODE"] }
AWK
pipeline env 'type = "stdin"' "command = [\"awk\", \"-f\", \"$WORK/env.awk\"]
env = { TAG = \"blue sky\" }"
echo '{"a":1}' | "$STREAMCTL" run "$WORK/env.toml" >"$WORK/env.out"
assert_eq '{"tag":"blue sky","node":"udf"}' "$(cat "$WORK/env.out")" "env of the command"

# --- Order at parallelism 1: many batches through a pass-through UDF come out in order.
cat >"$WORK/pass.py" <<PY
import os, sys; sys.path.insert(0, "$UDF")
import streamctl_udf
subtask = int(os.environ["STREAMCTL_SUBTASK"])
streamctl_udf.run(lambda r: {**r, "subtask": subtask})
PY
pipeline order 'type = "generator"
profile = "counter"
count = 20000' "command = [\"python3\", \"$WORK/pass.py\"]" 'type = "stdout"' 'batch_size = 100'
"$STREAMCTL" run "$WORK/order.toml" >"$WORK/order.out"
python3 - "$WORK/order.out" <<'PY' || fail "order at parallelism 1"
import json, sys
seqs = [json.loads(l)["seq"] for l in open(sys.argv[1])]
assert seqs == list(range(20000)), (len(seqs), seqs[:5])
PY

# --- Order per key at parallelism 2: `key` routes each key to one subtask, in order.
cat >"$WORK/keyed.toml" <<TOML
name = "keyed"
[sources.in]
type = "generator"
profile = "counter"
count = 20000
[operators.k]
type = "map"
inputs = ["in"]
set = { k = "seq % 7" }
[operators.udf]
type = "exec"
inputs = ["k"]
key = ["k"]
parallelism = 2
command = ["python3", "$WORK/pass.py"]
[sinks.out]
type = "stdout"
inputs = ["udf"]
TOML
"$STREAMCTL" run "$WORK/keyed.toml" >"$WORK/keyed.out"
python3 - "$WORK/keyed.out" <<'PY' || fail "order per key at parallelism 2"
import json, sys
by_key, subtask_of = {}, {}
for l in open(sys.argv[1]):
    r = json.loads(l)
    by_key.setdefault(r["k"], []).append(r["seq"])
    assert subtask_of.setdefault(r["k"], r["subtask"]) == r["subtask"], "a key went to two subtasks"
assert sorted(s for v in by_key.values() for s in v) == list(range(20000)), "records lost or repeated"
for k, seqs in by_key.items():
    assert seqs == sorted(seqs), f"key {k} out of order"
assert set(subtask_of.values()) == {0, 1}, subtask_of
PY

# --- A command that dies fails the job, naming the node, the command and its exit status;
# its last words (stderr) are in the log, prefixed with the node's name.
cat >"$WORK/crash.py" <<'PY'
import sys
n = 0
for line in sys.stdin:
    if line == "\n":
        sys.stdout.write("\n"); sys.stdout.flush(); continue
    n += 1
    if n > 500:
        print("giving up after 500 records", file=sys.stderr, flush=True)
        sys.exit(1)
    sys.stdout.write(line)
PY
pipeline crash 'type = "generator"
profile = "counter"
count = 5000' "command = [\"python3\", \"$WORK/crash.py\"]" 'type = "stdout"' 'batch_size = 100'
run_expect 1 "$STREAMCTL" run "$WORK/crash.toml"
assert_contains "$WORK/err" "operator 'udf' (exec, subtask 0): command python3 $WORK/crash.py exited with status 1 before the end of input"
assert_contains "$WORK/err" "[exec udf/0] giving up after 500 records"
assert_no_processes_left

# --- With [restart] and checkpoints, a command that crashes at random points (three times at
# most) gives every record exactly once in the committed output.
cat >"$WORK/flaky.py" <<PY
import os, random, sys
random.seed($SEED + os.getpid())
crashes = "$WORK/crashes"
crashed = len(os.listdir(crashes)) if os.path.isdir(crashes) else 0
limit = random.randint(1, 3000) if crashed < 3 else None
n = 0
for line in sys.stdin:
    if line == "\n":
        sys.stdout.write("\n"); sys.stdout.flush(); continue
    n += 1
    if limit is not None and n >= limit:
        os.makedirs(crashes, exist_ok=True)
        open(os.path.join(crashes, str(os.getpid())), "w").close()
        os._exit(3)
    sys.stdout.write(line[:-2] + ',"udf":true}\n')
PY
pipeline flaky 'type = "generator"
profile = "counter"
count = 8000
rate = 8000' "command = [\"python3\", \"$WORK/flaky.py\"]" "type = \"file\"
path = \"$WORK/flaky_out\"" "[checkpoint]
interval = \"100ms\"
dir = \"$WORK/ck\"
[restart]
strategy = \"fixed\"
delay = \"50ms\"
max_attempts = 10"
run_expect 0 "$STREAMCTL" run "$WORK/flaky.toml"
[[ -d "$WORK/crashes" ]] || fail "the flaky UDF never crashed (seed $SEED)"
assert_contains "$WORK/err" "exited with status 3"
cat "$WORK"/flaky_out/part-* | python3 -c '
import json, sys
seqs = sorted(json.loads(l)["seq"] for l in sys.stdin if json.loads(l)["udf"])
assert seqs == list(range(8000)), (len(seqs), len(set(seqs)))' || fail "output after restarts is not exactly once (seed $SEED)"
assert_no_processes_left

# --- Garbage output: each line that is not a JSON object is a bad record per on_error; the
# others pass.
cat >"$WORK/garbage.awk" <<'AWK'
/^$/ { print ""; fflush(); next }
/"seq":[0-9]*3,/ { print "oops " NR; next }
{ print }
AWK
pipeline garbage 'type = "generator"
profile = "counter"
count = 100' "command = [\"awk\", \"-f\", \"$WORK/garbage.awk\"]
on_error = \"dead_letter\"
dead_letter = \"$WORK/dead.jsonl\""
run_expect 0 "$STREAMCTL" run "$WORK/garbage.toml"
assert_eq 90 "$(wc -l <"$WORK/out")" "records that pass a UDF printing garbage"
assert_eq 10 "$(wc -l <"$WORK/dead.jsonl")" "dead letters of a UDF printing garbage"
assert_contains "$WORK/dead.jsonl" '"input":"oops 4"'
assert_contains "$WORK/dead.jsonl" "is not a JSON object"
pipeline garbage_fail 'type = "generator"
profile = "counter"
count = 100' "command = [\"awk\", \"-f\", \"$WORK/garbage.awk\"]
on_error = \"fail\""
run_expect 1 "$STREAMCTL" run "$WORK/garbage_fail.toml"
assert_contains "$WORK/err" "node 'udf': bad record at line 4: output of command awk -f $WORK/garbage.awk is not a JSON object"
assert_no_processes_left

# --- A command that prints an empty line after each record (print(json.dumps(r) + "\n"))
# would shift every answer after the first: the job fails, saying what came after an answer.
cat >"$WORK/blank.py" <<'PY'
import sys
for line in sys.stdin:
    if line == "\n":
        sys.stdout.write("\n"); sys.stdout.flush(); continue
    sys.stdout.write(line + "\n")
PY
pipeline blank 'type = "generator"
profile = "counter"
count = 1000' "command = [\"python3\", \"$WORK/blank.py\"]" 'type = "stdout"' 'batch_size = 10'
run_expect 1 "$STREAMCTL" run "$WORK/blank.toml"
assert_contains "$WORK/err" "after the empty line that ended its answer to a batch"
assert_no_processes_left

# --- A command that never answers fails the job after `timeout`, saying what it owes.
cat >"$WORK/stuck.py" <<'PY'
import sys, time
sys.stdin.readline()
time.sleep(3600)
PY
pipeline stuck 'type = "generator"
profile = "counter"
count = 10' "command = [\"python3\", \"$WORK/stuck.py\"]
timeout = \"1s\""
start=$SECONDS
run_expect 1 "$STREAMCTL" run "$WORK/stuck.toml"
((SECONDS - start < 20)) || fail "a stuck UDF took $((SECONDS - start)) s to fail the job"
assert_contains "$WORK/err" "has neither read nor written for 1000 ms (\`timeout\`)"
assert_no_processes_left
pgrep -f -- "$WORK/stuck.py" >/dev/null && fail "the stuck UDF outlived its job"

# --- A slow command is not a dead worker: a batch that takes longer than the heartbeat
# timeout (but within `timeout`, as the command keeps reading) does not fail the job.
cat >"$WORK/slow.py" <<'PY'
import sys, time
for line in sys.stdin:
    if line == "\n":
        time.sleep(3)
    sys.stdout.write(line)
    sys.stdout.flush()
PY
pipeline slow 'type = "generator"
profile = "counter"
count = 3' "command = [\"python3\", \"$WORK/slow.py\"]
timeout = \"10s\"" 'type = "stdout"' '[restart]
heartbeat_timeout = "2s"'
run_expect 0 "$STREAMCTL" run "$WORK/slow.toml"
assert_eq 3 "$(wc -l <"$WORK/out")" "records through a slow UDF"

# --- A command that prints 1000 lines per input (far more than a pipe holds) does not
# deadlock: every line arrives.
cat >"$WORK/burst.awk" <<'AWK'
/^$/ { print ""; fflush(); next }
{ for (k = 0; k < 1000; k++) printf "{\"r\":%d,\"k\":%d,\"pad\":\"%s\"}\n", NR, k, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" }
AWK
pipeline burst 'type = "generator"
profile = "counter"
count = 300' "command = [\"awk\", \"-f\", \"$WORK/burst.awk\"]
timeout = \"20s\""
run_expect 0 "$STREAMCTL" run "$WORK/burst.toml"
assert_eq 300000 "$(wc -l <"$WORK/out")" "lines of a UDF that emits 1000 per input"

# --- Validation: a missing command, a misspelt key; a command that does not exist.
pipeline nocmd 'type = "stdin"' 'comand = ["cat"]'
run_expect 2 "$STREAMCTL" validate "$WORK/nocmd.toml"
assert_contains "$WORK/err" "nocmd.toml:"
assert_contains "$WORK/err" "command"
assert_contains "$WORK/err" "comand"
pipeline missing 'type = "stdin"' 'command = ["no-such-udf-program"]'
echo '{"a":1}' | run_expect 1 "$STREAMCTL" run "$WORK/missing.toml"
assert_contains "$WORK/err" "cannot start command no-such-udf-program: 'no-such-udf-program' not found in PATH"
assert_no_processes_left
echo ok
