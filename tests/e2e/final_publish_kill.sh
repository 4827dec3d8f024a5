# A worker killed with -9 while the sinks publish a checkpointed job's last output: the job is
# restarted from its final checkpoint and still exits 0 with exactly the failure-free output.
# Before the final checkpoint, such a kill (chaos scenario kill, seed 1840766336, in CI) ended
# the job with exit 1, "the final output ... could not be published; it may be incomplete",
# with records missing, and `restart` refused the job.
#
# Two moments: right after the coordinator says the final checkpoint is complete (the sinks
# are about to publish, or publishing), and after a task has recorded its output as published
# (its worker is about to exit 0). The kill must land before the worker exits on its own, so
# each case is tried until it does.
source "$(dirname "$0")/lib/common.bash"

make_clicks 200000 >"$WORK/clicks.jsonl"

pipeline() { # NAME OUTPUT-DIR
  cat <<TOML
name = "$1"
parallelism = 2
[checkpoint]
interval = "1h"
dir = "$WORK/ck"
[restart]
strategy = "fixed"
delay = "50ms"
max_attempts = 3
[sources.in]
type = "file"
path = "$WORK/clicks.jsonl"
parallelism = 1
[operators.per_user]
type = "reduce"
inputs = ["in"]
key = ["user"]
aggregates = { n = "count()", b = "sum(bytes)" }
[sinks.out]
type = "file"
inputs = ["per_user"]
path = "$2"
TOML
}

pipeline reference "$WORK/reference" >"$WORK/reference.toml"
run_expect 0 "$STREAMCTL" run "$WORK/reference.toml"
cat "$WORK"/reference/part-* | canonical >"$WORK/expected.txt"
[[ -s "$WORK/expected.txt" ]] || fail "the reference run wrote nothing"

# attempt MOMENT: runs the job and kills one of its workers at MOMENT; exit 0 when the kill
# landed (the job restarted), 1 when the job ended first.
attempt() {
  local moment=$1
  rm -rf "$WORK/parts" "$WORK/ck" "$STREAMCTL_STATE_DIR"
  pipeline "kill-$moment" "$WORK/parts" >"$WORK/job.toml"
  python3 - "$STREAMCTL" "$WORK" "$moment" "$STREAMCTL_STATE_DIR" <<'PY' || fail "$moment: $(tail -20 "$WORK/job.log")"
import glob, os, signal, subprocess, sys, time
streamctl, work, moment, state = sys.argv[1:]
job = subprocess.Popen([streamctl, "-v", "run", work + "/job.toml"], stdout=subprocess.DEVNULL,
                       stderr=open(work + "/job.log", "wb"), stdin=subprocess.DEVNULL)
def due():
    if moment == "final-checkpoint":
        return b"final checkpoint complete" in open(work + "/job.log", "rb").read()
    return bool(glob.glob(state + "/jobs/*/published-*"))
deadline = time.monotonic() + 60
while not due() and job.poll() is None:
    if time.monotonic() > deadline:
        sys.exit("the moment never came within 60 s")
    time.sleep(0.0002)
if job.poll() is None:
    pids = subprocess.run(["pgrep", "-f", "--", "worker --job-dir " + state], capture_output=True,
                          text=True).stdout.split()
    if pids:
        try:
            os.kill(int(pids[-1]), signal.SIGKILL)
        except ProcessLookupError:
            pass # it exited first: the job ends without a restart, and the case is tried again
open(work + "/job.code", "w").write(str(job.wait()))
PY
  assert_eq 0 "$(cat "$WORK/job.code")" "$moment: exit status (log: $(tail -5 "$WORK/job.log"))"
  cat "$WORK"/parts/part-* | canonical >"$WORK/got.txt"
  cmp -s "$WORK/expected.txt" "$WORK/got.txt" ||
    fail "$moment: output differs from the failure-free run's ($(wc -l <"$WORK/got.txt") lines, expected $(wc -l <"$WORK/expected.txt"))"
  assert_no_processes_left
  grep -q "restarting the job" "$WORK/job.log" || return 1
  assert_contains "$WORK/job.log" "before it had published the job's final output"
  ! grep -q "could not be published" "$WORK/job.log" || fail "$moment: the job reported unpublished output"
  echo "$moment (try $try): the job restarted $(grep -o "from [^ ]*/chk-[0-9]*" "$WORK/job.log" | tail -1) and exited 0"
}

for moment in final-checkpoint published; do
  for try in $(seq 1 20); do
    attempt "$moment" && break
    ((try < 20)) || fail "$moment: no kill landed before the job ended (the test could not test)"
  done
done
echo ok
