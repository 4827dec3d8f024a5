# Two overlapping cron runs never both emit (issue 11): `run --resume` and `--savepoint-on-exit`
# hold the lock of the job's checkpoint directory for the whole run, with or without
# [checkpoint]. Before it, two runs without [checkpoint] both resumed from the same savepoint
# and both published what followed it: every record twice. A second run while the first holds
# the lock exits 2 at once, naming the first run's pid and job, with nothing on stdout and no
# job registered; one with --wait-lock waits and then goes on where the first stopped; one
# after the first is killed -9 is not refused (the kernel drops the lock of a dead process).
# Across all the runs that were not refused, the output is every record once.
source "$(dirname "$0")/lib/common.bash"

N=20000
jobs_dir=$STREAMCTL_STATE_DIR/jobs

# pipeline NAME [CHECKPOINT_TABLE]: a counter generator at 200 records a second (a first run
# lasts until it is stopped; a later one gets --set sources.gen.rate=0 to finish at once) into
# a stdout sink, so that whatever a run emits is on its stdout.
pipeline() {
  cat <<TOML
name = "$1"
${2:-}
[sources.gen]
type = "generator"
profile = "counter"
count = $N
rate = 200
[sinks.out]
type = "stdout"
inputs = ["gen"]
TOML
}

# start_first NAME FILE: `run --resume --savepoint-on-exit` in the background, $WORK/NAME-1.out
# and .err; returns once records flow. Its pid goes to $first.
start_first() {
  "$STREAMCTL" -v run "$2" --resume --savepoint-on-exit >"$WORK/$1-1.out" 2>"$WORK/$1-1.err" &
  first=$!
  wait_for_text "$WORK/$1-1.err" "records flowing" 60
  wait_for_lines "$WORK/$1-1.out" 1 60
}

# job_of NAME: the id of the only job of that name in the state dir.
job_of() {
  local ids
  ids=$(cd "$jobs_dir" && ls -d "$1"-* 2>/dev/null || true)
  [[ $(wc -w <<<"$ids") == 1 ]] || fail "expected one job named $1, found: [${ids}]"
  echo "$ids"
}

# refused NAME FILE ARGS...: a second run while the first ($first) holds the lock: exit 2, the
# message naming the first run's pid and job, empty stdout, no job registered.
refused() {
  local name=$1 file=$2
  shift 2
  local jobs_before
  jobs_before=$(ls "$jobs_dir" | wc -l)
  run_expect 2 "$STREAMCTL" -v run "$file" --resume --savepoint-on-exit "$@"
  kill -0 "$first" 2>/dev/null || fail "the first run of $name ended before the second was tried"
  assert_contains "$WORK/err" "$file: another run of this job holds the lock of '$STREAMCTL_STATE_DIR/checkpoints/$name' (pid $first, job $(job_of "$name"))"
  [[ ! -s $WORK/out ]] || fail "a refused run of $name wrote to stdout: $(head -c 300 "$WORK/out")"
  assert_eq "$jobs_before" "$(ls "$jobs_dir" | wc -l)" "jobs in the state dir after a refused run of $name"
}

# every_record_once NAME FILES...: the runs' stdout together hold seq 0..N-1, each once.
every_record_once() {
  local name=$1
  shift
  cat "$@" | python3 -c 'import json, sys
for l in sys.stdin:
    if l.strip(): print(json.loads(l)["seq"])' | sort -n >"$WORK/$name.seqs"
  local dups
  dups=$(uniq -d "$WORK/$name.seqs" | head -5 | tr '\n' ' ')
  [[ -z $dups ]] || fail "$name: records emitted more than once over the runs (seq $dups...)"
  assert_eq "$N" "$(wc -l <"$WORK/$name.seqs")" "$name: records emitted over the runs"
  seq 0 $((N - 1)) | cmp -s - "$WORK/$name.seqs" || fail "$name: the runs did not emit seq 0..$((N - 1))"
}

# --- Without [checkpoint]: the first run is stopped with a savepoint (streamctl stop); a run
# that waits for the lock meanwhile then resumes from that savepoint.
pipeline plain >"$WORK/plain.toml"
start_first plain "$WORK/plain.toml"
refused plain "$WORK/plain.toml"
refused plain "$WORK/plain.toml" --set sources.gen.rate=0
# --wait-lock=DURATION: waits that long, then is refused the same way.
started=$SECONDS
refused plain "$WORK/plain.toml" --wait-lock=1s
((SECONDS - started >= 1)) || fail "--wait-lock=1s gave up before a second"
assert_contains "$WORK/err" "waiting for the lock of '$STREAMCTL_STATE_DIR/checkpoints/plain' (pid $first"
# --wait-lock without a duration: waits as long as it takes, then goes on from the savepoint.
"$STREAMCTL" -v run --resume --savepoint-on-exit --wait-lock "$WORK/plain.toml" --set sources.gen.rate=0 \
  >"$WORK/plain-2.out" 2>"$WORK/plain-2.err" &
waiting=$!
wait_for_text "$WORK/plain-2.err" "waiting for the lock"
[[ ! -s $WORK/plain-2.out ]] || fail "a run waiting for the lock wrote to stdout"
run_expect 0 "$STREAMCTL" stop "$(job_of plain)"
wait "$first" || fail "the first run of plain, stopped by streamctl stop, exited $?"
wait "$waiting" || { cat "$WORK/plain-2.err" >&2; fail "the run that waited for the lock exited $?"; }
assert_contains "$WORK/plain-2.err" "resuming from $STREAMCTL_STATE_DIR/checkpoints/plain/savepoint-"
every_record_once plain "$WORK"/plain-{1,2}.out
assert_no_processes_left

# --- With [checkpoint] (periodic checkpoints): the same refusal; the first run is stopped by
# SIGTERM at a last checkpoint, and the next run resumes from it.
pipeline ckpt '[checkpoint]
interval = "300ms"' >"$WORK/ckpt.toml"
start_first ckpt "$WORK/ckpt.toml"
wait_for_file "$STREAMCTL_STATE_DIR/checkpoints/ckpt/chk-1/_metadata" 60
refused ckpt "$WORK/ckpt.toml"
kill -TERM "$first"
set +e
wait "$first"
code=$?
set -e
assert_eq 143 "$code" "exit status of the first run of ckpt after SIGTERM"
run_expect 0 "$STREAMCTL" -v run "$WORK/ckpt.toml" --resume --savepoint-on-exit --set sources.gen.rate=0
cp "$WORK/out" "$WORK/ckpt-2.out"
assert_contains "$WORK/err" "resuming from $STREAMCTL_STATE_DIR/checkpoints/ckpt/chk-"
every_record_once ckpt "$WORK"/ckpt-{1,2}.out
assert_no_processes_left

# --- A run killed -9 while it holds the lock: the next run is not refused.
pipeline killed >"$WORK/killed.toml"
start_first killed "$WORK/killed.toml"
refused killed "$WORK/killed.toml"
{ kill -KILL "$first" && wait "$first"; } 2>/dev/null || true # (bash's "Killed" notice)
[[ -e $STREAMCTL_STATE_DIR/checkpoints/killed/lock ]] || fail "the killed run left no lock file"
run_expect 0 "$STREAMCTL" run "$WORK/killed.toml" --resume --savepoint-on-exit --set sources.gen.rate=0
assert_eq "$N" "$(wc -l <"$WORK/out")" "records of the run after the killed one (nothing to resume: from the start)"
if grep -q "holds the lock" "$WORK/err"; then fail "the run after a killed one was refused: $(cat "$WORK/err")"; fi

# --- --detach: the job's own process holds the lock once the command has returned.
pipeline detached >"$WORK/detached.toml"
run_expect 0 "$STREAMCTL" run --detach --resume --savepoint-on-exit "$WORK/detached.toml"
id=$(cat "$WORK/out")
wait_for_lines "$jobs_dir/$id/stdout" 1 60
first=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["coordinator_pid"])' "$jobs_dir/$id/job.json")
refused detached "$WORK/detached.toml"
run_expect 0 "$STREAMCTL" cancel "$id"
assert_no_processes_left
echo ok
