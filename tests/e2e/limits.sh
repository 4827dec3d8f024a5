# Limits (issue 7, findings 5, 6 and the status part of 9): what a host cannot run is refused
# with exit 2 and a message naming the limit and the flag that raises it, before anything starts.
source "$(dirname "$0")/lib/common.bash"

# A directory of this test's own as TMPDIR: what a run leaves there is seen.
export TMPDIR="$WORK/tmp"
mkdir -p "$TMPDIR"

assert_tmp_clean() {
  local left
  left=$(find "$TMPDIR" -mindepth 1 -maxdepth 1 -name 'streamctl-*' | head -5)
  [[ -z "$left" ]] || fail "$1: left behind in \$TMPDIR: $left"
}

# No worker of this state dir was ever registered: no job directory with a task in it.
assert_no_job_started() {
  local jobs
  jobs=$(find "$STREAMCTL_STATE_DIR/jobs" -name job.json 2>/dev/null | head -1 || true)
  [[ -z "$jobs" ]] || fail "$1: a job was registered: $jobs"
}

# --- The pipeline file's size. `validate /dev/zero` read forever, growing ~330 MB/s.
run_expect 2 timeout 10 "$STREAMCTL" validate /dev/zero
assert_contains "$WORK/err" "larger than 16 MiB"
assert_contains "$WORK/err" "--max-pipeline-size"
run_expect 2 timeout 10 "$STREAMCTL" run /dev/zero
assert_contains "$WORK/err" "larger than 16 MiB"

# A regular file of 17 MiB (a comment and padding: valid TOML) is refused before parsing ...
{
  echo 'name = "big"'
  head -c $((17 << 20)) /dev/zero | tr '\0' ' '
  echo
} >"$WORK/big.toml"
run_expect 2 timeout 10 "$STREAMCTL" validate "$WORK/big.toml"
assert_contains "$WORK/err" "big.toml:0:0: the pipeline file is larger than 16 MiB"
# ... and read when the limit is raised (then it is only missing its nodes).
run_expect 2 timeout 60 "$STREAMCTL" validate --max-pipeline-size 32MiB "$WORK/big.toml"
assert_contains "$WORK/err" "has no source"
rm -f "$WORK/big.toml"

# A pipe has no size: it is read once, bounded, and works as a file does.
run_expect 0 "$STREAMCTL" validate <(cat "$SOURCE_DIR/examples/clicks_filter.toml")

# --- Worker processes. parallelism = 32768 validated and tried to fork 32,768 workers.
cat >"$WORK/wide.toml" <<TOML
name = "wide"
max_parallelism = 32768
parallelism = 32768

[sources.g]
type = "generator"
profile = "clicks"
count = 10

[sinks.out]
type = "file"
inputs = ["g"]
path = "$WORK/out-wide"
TOML
run_expect 2 "$STREAMCTL" validate "$WORK/wide.toml"
assert_contains "$WORK/err" "wide.toml:3:15: the job needs 32768 worker processes, above the limit of 1024 per job"
assert_contains "$WORK/err" "--max-workers N"
assert_contains "$WORK/err" "per host"
assert_contains "$WORK/err" "--max-host-workers N"
run_expect 2 "$STREAMCTL" graph "$WORK/wide.toml"
assert_contains "$WORK/err" "--max-workers N"
run_expect 2 timeout 30 "$STREAMCTL" run "$WORK/wide.toml"
assert_contains "$WORK/err" "wide.toml:3:15: the job needs 32768 worker processes"
assert_no_job_started "run of 32768 workers"
assert_no_processes_left
# -p, too, is named where it comes from (the --set it becomes).
run_expect 2 "$STREAMCTL" run -p 4000 --set max_parallelism=32768 "$SOURCE_DIR/examples/generated_clicks.toml"
assert_contains "$WORK/err" "<--set>:2:"
assert_contains "$WORK/err" "above the limit of 1024 per job"

# A valid pipeline of 20,001 nodes that do not fuse forked 20,001 workers: the OOM killer came.
python3 - "$WORK/many.toml" "$WORK/out-many" <<'PY'
import sys
n = 19999
with open(sys.argv[1], "w") as f:
    f.write('name = "many"\n\n[sources.g]\ntype = "generator"\nprofile = "clicks"\ncount = 10\n\n')
    for i in range(n):
        f.write(f'[operators.f{i}]\ntype = "filter"\ninputs = ["g"]\nwhere = "true"\n\n')
    f.write(f'[sinks.out]\ntype = "file"\npath = "{sys.argv[2]}"\n')
    f.write('inputs = [' + ", ".join(f'"f{i}"' for i in range(n)) + "]\n")
PY
run_expect 2 timeout 120 "$STREAMCTL" validate "$WORK/many.toml"
assert_contains "$WORK/err" "the job needs 20001 worker processes, above the limit of 1024 per job"
assert_contains "$WORK/err" "operator 'f1023' starts worker 1025"
assert_contains "$WORK/err" "--max-workers N"
run_expect 2 timeout 120 "$STREAMCTL" run "$WORK/many.toml"
assert_contains "$WORK/err" "the job needs 20001 worker processes"
assert_no_job_started "run of 20001 nodes"
assert_no_processes_left
rm -f "$WORK/many.toml"

# The flags move the limits both ways, shown on a job of 4 workers (3 sources, 1 sink).
cat >"$WORK/small.toml" <<TOML
name = "small"

[sources.a]
type = "generator"
profile = "clicks"
count = 5
parallelism = 3

[sinks.out]
type = "file"
inputs = ["a"]
path = "$WORK/out-small"
parallelism = 1
TOML
run_expect 0 "$STREAMCTL" validate "$WORK/small.toml"
run_expect 2 "$STREAMCTL" validate --max-workers 3 "$WORK/small.toml"
assert_contains "$WORK/err" "small.toml:7:15: the job needs 4 worker processes, above the limit of 3 per job"
run_expect 2 "$STREAMCTL" run --max-workers 3 "$WORK/small.toml"
assert_contains "$WORK/err" "above the limit of 3 per job"
assert_no_job_started "run beyond --max-workers"
run_expect 2 "$STREAMCTL" run --max-host-workers 2 "$WORK/small.toml"
assert_contains "$WORK/err" "above the limit of 2 per host (--max-host-workers"
assert_no_job_started "run beyond --max-host-workers"
run_expect 0 timeout 60 "$STREAMCTL" run --max-workers 4 --max-host-workers 4 "$WORK/small.toml"
assert_eq 5 "$(cat "$WORK"/out-small/part-* | wc -l)" "records of the job run at its limit"

# The per-host limit counts the workers of the jobs already running under the state dir.
cat >"$WORK/endless.toml" <<TOML
name = "endless"
[sources.g]
type = "generator"
profile = "clicks"
rate = 100
[sinks.out]
type = "file"
inputs = ["g"]
path = "$WORK/out-endless"
TOML
"$STREAMCTL" -v run "$WORK/endless.toml" 2>"$WORK/endless.err" &
endless=$!
wait_for_text "$WORK/endless.err" "started" 60
run_expect 2 "$STREAMCTL" run --max-host-workers 4 "$WORK/small.toml"
assert_contains "$WORK/err" "the job needs 4 worker processes and other jobs run 1 here, above the limit of 4 per host"
run_expect 0 timeout 60 "$STREAMCTL" run --max-host-workers 5 "$WORK/small.toml"
kill -TERM "$endless"
wait "$endless" || true

# --- Job names. A name of 56 characters or more validated, then `run` failed with "File name
# too long" (its socket path held the name) and left an empty streamctl-* directory in $TMPDIR.
name60=$(printf 'n%.0s' $(seq 60))
sed "s/^name = .*/name = \"$name60\"/" "$WORK/small.toml" >"$WORK/name60.toml"
run_expect 0 "$STREAMCTL" validate "$WORK/name60.toml"
rm -rf "$WORK/out-small"
run_expect 0 timeout 60 "$STREAMCTL" run "$WORK/name60.toml"
assert_eq 5 "$(cat "$WORK"/out-small/part-* | wc -l)" "records of the job with a 60-character name"
assert_tmp_clean "a run with a 60-character name"
run_expect 0 "$STREAMCTL" status "$name60"
assert_contains "$WORK/out" "finished"

# With the transport over TCP too (no Unix socket at all).
rm -rf "$WORK/out-small"
run_expect 0 timeout 60 "$STREAMCTL" run --transport tcp "$WORK/name60.toml"
assert_tmp_clean "a tcp run with a 60-character name"

# A name too long for a directory name is refused by validate, saying so.
name200=$(printf 'x%.0s' $(seq 200))
sed "s/^name = .*/name = \"$name200\"/" "$WORK/small.toml" >"$WORK/name200.toml"
run_expect 2 "$STREAMCTL" validate "$WORK/name200.toml"
assert_contains "$WORK/err" "name200.toml:1:8: the job 'name' 'xxxxxxxxxxxxxxxxxxxxxxxx...' is 200 characters long, above the limit of 128"
run_expect 2 "$STREAMCTL" run "$WORK/name200.toml"
assert_contains "$WORK/err" "above the limit of 128"
assert_tmp_clean "a refused run with a 200-character name"

# --- Status after a failure (finding 9): the workers are gone, so no pid is shown for them.
cat >"$WORK/failing.toml" <<TOML
name = "failing"
[sources.in]
type = "stdin"
format = "json"
on_error = "fail"
[operators.pass]
type = "filter"
inputs = ["in"]
where = "true"
parallelism = 2
[sinks.out]
type = "stdout"
inputs = ["pass"]
TOML
set +e
echo 'not json' | timeout 60 "$STREAMCTL" run "$WORK/failing.toml" >"$WORK/out" 2>"$WORK/err"
code=$?
set -e
assert_eq 1 "$code" "exit code of a failing job"
run_expect 0 "$STREAMCTL" status failing
assert_contains "$WORK/out" "failing): failed"
assert_contains "$WORK/out" "pass[1]: exited"
if grep -qE 'pid [0-9]+' "$WORK/out"; then
  cat "$WORK/out" >&2
  fail "status of a failed job shows a pid for a dead worker"
fi
python3 - "$STREAMCTL_STATE_DIR" <<'PY' || fail "job.json of the failed job lists a pid"
import glob, json, sys
for path in glob.glob(sys.argv[1] + "/jobs/failing-*/job.json"):
    for t in json.load(open(path))["tasks"]:
        assert t["pid"] is None, t
PY
assert_tmp_clean "the whole test"
assert_no_processes_left
echo "limits: ok"
