# `streamctl restart JOB` after the coordinator was killed with -9 never exits 0 with records
# missing or published twice (issue 7, chaos scenario kill). What broke:
# - bug A (seeds 1006, 1089, ...): a stdin job's restart read its own, empty, stdin, took that
#   for the end of the input, and exited 0 having lost what the dead coordinator had not read
#   (0 of 68,854 records once). Now restart refuses with exit 2 before starting anything.
# - bug B (seed 9100): a coordinator killed after the sinks had published all the output at
#   the end of the input, before job.json said "finished", was restarted from its last
#   checkpoint, and everything after that checkpoint came out twice. Now the end of the job is
#   recorded before anything is published, and restart runs nothing again.
source "$(dirname "$0")/lib/common.bash"

make_clicks 100000 >"$WORK/clicks.jsonl"

pipeline() { # NAME SOURCE-LINES SINK-LINES
  cat <<TOML
name = "$1"
parallelism = 2
[checkpoint]
interval = "2s"
dir = "$WORK/ck"
[restart]
strategy = "fixed"
delay = "50ms"
max_attempts = 10
[sources.in]
$2
[operators.per_user]
type = "reduce"
inputs = ["in"]
key = ["user"]
aggregates = { n = "count()", b = "sum(bytes)" }
[sinks.out]
$3
TOML
}
file_source="type = \"file\"
path = \"$WORK/clicks.jsonl\"
parallelism = 1"
stdout_sink='type = "stdout"
inputs = ["per_user"]'

job_id() { # NAME: the id of the one job of that name
  python3 -c 'import json, sys, glob
for p in glob.glob(sys.argv[1] + "/jobs/" + sys.argv[2] + "-*/job.json"): print(json.load(open(p))["id"])' \
    "$STREAMCTL_STATE_DIR" "$1"
}

# The reference: the same job without faults.
pipeline reference "$file_source" "$stdout_sink" >"$WORK/reference.toml"
run_expect 0 "$STREAMCTL" run "$WORK/reference.toml"
canonical <"$WORK/out" >"$WORK/expected.txt"
[[ -s "$WORK/expected.txt" ]] || fail "the reference run wrote nothing"
expected_bytes=$(stat -c %s "$WORK/out")

# --- bug A: stdin, coordinator killed while stdin is still being fed ---
pipeline stdin 'type = "stdin"' "$stdout_sink" | sed 's/interval = "2s"/interval = "100ms"/' >"$WORK/stdin.toml"
python3 - "$WORK/clicks.jsonl" <<'PY' | "$STREAMCTL" -v run "$WORK/stdin.toml" >"$WORK/stdin.out" 2>"$WORK/stdin.log" &
import sys, time
data = open(sys.argv[1], "rb").read()
step = len(data) // 100 + 1
try:
    for k in range(0, len(data), step):
        sys.stdout.buffer.write(data[k:k + step])
        sys.stdout.buffer.flush()
        time.sleep(0.05)
except BrokenPipeError:
    pass
PY
pid=$!
wait_for_text "$WORK/stdin.log" "records flowing"
# Until some checkpoint is on disk, so that the restart would have one to start from.
deadline=$((SECONDS + 30))
until grep -q '"last_checkpoint": "/' "$STREAMCTL_STATE_DIR"/jobs/stdin-*/job.json 2>/dev/null; do
  ((SECONDS < deadline)) || fail "the stdin job completed no checkpoint"
  sleep 0.05
done
kill -9 $pid
wait $pid 2>/dev/null || true
assert_no_processes_left
id=$(job_id stdin)
run_expect 2 "$STREAMCTL" restart "$id" </dev/null
assert_contains "$WORK/err" "reads source 'in' from stdin: its input ended with the coordinator that read it"
assert_contains "$WORK/err" "Run the job again on its whole input"
[[ ! -s "$WORK/out" ]] || fail "the refused restart wrote output"
assert_no_processes_left

# --- bug B: the coordinator killed after the job published all its output at its end ---
# The window between the sinks' last output and job.json's "finished" is short; to land in it
# every time, the coordinator is stopped (SIGSTOP) as soon as output appears (it only waits
# for its workers then), the workers finish publishing and exit, and the coordinator is killed.
file_sink="type = \"file\"
inputs = [\"per_user\"]
path = \"$WORK/parts\"
parallelism = 2"

published() { # SINK: the output published so far, canonical
  if [[ $1 == stdout ]]; then canonical <"$WORK/finish.out"; else cat "$WORK"/parts/part-* 2>/dev/null | canonical; fi
}

# finish SINK MODE: MODE "complete" kills the stopped coordinator once its workers are gone;
# "midway" kills it as soon as output appears (its workers die with it, publishing or not).
finish() {
  local sink=$1 mode=$2
  rm -rf "$WORK/ck/finish" "$WORK/parts" "$STREAMCTL_STATE_DIR"/jobs/finish-*
  # No checkpoint before the end: all the output is published at the end of the input.
  pipeline finish "$file_source" "$([[ $sink == stdout ]] && echo "$stdout_sink" || echo "$file_sink")" |
    sed 's/interval = "2s"/interval = "1h"/' >"$WORK/finish.toml"
  # The job is started from here, so that a slow start of python cannot miss its end.
  python3 - "$STREAMCTL" "$sink" "$WORK" "$mode" "$STREAMCTL_STATE_DIR" <<'PY' || fail "$sink $mode: $(cat "$WORK/finish.log")"
import glob, os, signal, subprocess, sys, time
streamctl, sink, work, mode, state = sys.argv[1:]
job = subprocess.Popen([streamctl, "-v", "run", work + "/finish.toml"], stdout=open(work + "/finish.out", "wb"),
                       stderr=open(work + "/finish.log", "wb"), stdin=subprocess.DEVNULL)
def output():
    if sink == "stdout":
        return os.stat(work + "/finish.out").st_size > 0
    return bool(glob.glob(work + "/parts/part-*"))
deadline = time.monotonic() + 60
while not output() and job.poll() is None:
    if time.monotonic() > deadline:
        sys.exit("no output within 60 s")
    time.sleep(0.0002)
if job.poll() is not None:
    sys.exit(0) # the job ended first
job.send_signal(signal.SIGKILL if mode == "midway" else signal.SIGSTOP)
if mode == "complete":
    # The workers publish the rest and exit; the stopped coordinator reaps nobody. Stopped
    # before ZeroMQ had sent every worker its RELEASE, it leaves some waiting: let it go on
    # then, and try again (the job ends first).
    stopped = time.monotonic()
    while subprocess.run(["pgrep", "-f", "--", "worker --job-dir " + state], stdout=subprocess.DEVNULL).returncode == 0:
        if time.monotonic() > stopped + 5:
            job.send_signal(signal.SIGCONT)
            job.wait()
            sys.exit(0)
        time.sleep(0.05)
    job.send_signal(signal.SIGKILL)
job.wait()
PY
  if [[ $mode == complete ]]; then
    published "$sink" >"$WORK/got.txt"
    cmp -s "$WORK/expected.txt" "$WORK/got.txt" || fail "$sink: the workers did not publish the whole output"
  fi
  assert_no_processes_left
  id=$(job_id finish)
  if grep -q '"state": "finished"' "$STREAMCTL_STATE_DIR/jobs/$id/job.json"; then
    echo "$sink $mode: the job ended before the kill"
    return 1
  fi
  set +e
  "$STREAMCTL" -v restart "$id" >"$WORK/restart.out" 2>"$WORK/restart.err"
  local code=$?
  set -e
  cat "$WORK/restart.out" >>"$WORK/finish.out"
  published "$sink" >"$WORK/got.txt"
  if [[ $code == 0 ]]; then
    cmp -s "$WORK/expected.txt" "$WORK/got.txt" ||
      fail "$sink $mode: restart exited 0 and the output differs from a failure-free run's ($(wc -l <"$WORK/got.txt") lines, expected $(wc -l <"$WORK/expected.txt"))"
    assert_contains "$WORK/restart.err" "had published all its output before its coordinator died"
    run_expect 0 "$STREAMCTL" status "$id" --json
    assert_contains "$WORK/out" '"state":"finished"'
    run_expect 2 "$STREAMCTL" restart "$id"
  else
    [[ $mode == midway ]] || fail "$sink: restart exited $code after a complete output: $(cat "$WORK/restart.err")"
    assert_eq 2 "$code" "$sink: exit code of a restart refused after the final output began"
    assert_contains "$WORK/restart.err" "was publishing its final output when its coordinator died"
    [[ ! -s "$WORK/restart.out" ]] || fail "$sink: the refused restart wrote output"
    python3 - "$WORK/expected.txt" "$WORK/got.txt" <<'PY' || fail "$sink: output not in the failure-free run's"
import collections, sys
e, g = (collections.Counter(open(p).read().splitlines()) for p in sys.argv[1:])
assert not (g - e), f"{sum((g - e).values())} records not in the reference, or repeated"
PY
  fi
  assert_no_processes_left
  echo "$sink $mode: restart exited $code"
}

# The job ends within a few ms of its first output: tried until the kill lands.
for what in "stdout complete" "file complete" "stdout midway" "file midway"; do
  for try in $(seq 1 10); do
    finish $what && break
    ((try < 10)) || fail "$what: no kill landed before the job ended (the test could not test)"
  done
done
echo ok
