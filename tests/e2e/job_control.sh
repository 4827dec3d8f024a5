# Jobs are driven from another terminal: `list` shows them, `status` asks the running
# coordinator over its control socket, `stop` drains a job (exit 0, output committed), `cancel`
# ends one at once (exit 1, nothing committed). A JOB that does not exist is a usage error.
source "$(dirname "$0")/lib/common.bash"

cat >"$WORK/p.toml" <<TOML
name = "endless"
parallelism = 2
[sources.gen]
type = "generator"
profile = "counter"
rate = 5000
[operators.even]
type = "filter"
inputs = ["gen"]
where = "seq % 2 == 0"
[sinks.out]
type = "file"
inputs = ["even"]
path = "$WORK/committed"
parallelism = 1
TOML

run_expect 2 "$STREAMCTL" status nosuchjob
assert_contains "$WORK/err" "no job 'nosuchjob'"
run_expect 0 "$STREAMCTL" list
assert_eq "" "$(cat "$WORK/out")" "no jobs yet"

# stop: a graceful drain.
"$STREAMCTL" -v run "$WORK/p.toml" 2>"$WORK/run-err" &
pid=$!
wait_for_text "$WORK/run-err" "records flowing"
run_expect 0 "$STREAMCTL" list
assert_contains "$WORK/out" "endless"
assert_contains "$WORK/out" "running"
sleep 1.5 # a heartbeat or two, so that status has counts
run_expect 0 "$STREAMCTL" status endless --json
python3 - "$WORK/out" <<'PY' || fail "status --json: $(cat "$WORK/out")"
import json, os, sys
s = json.load(open(sys.argv[1]))
assert s["name"] == "endless" and s["state"] == "running", s
ops = {o["name"]: o for o in s["operators"]}
assert set(ops) == {"gen", "even", "out"}, ops
assert ops["gen"]["parallelism"] == 2 and len(ops["gen"]["subtasks"]) == 2, ops["gen"]
for sub in ops["gen"]["subtasks"]:
    os.kill(sub["pid"], 0)  # a live worker
    assert sub["host"] == "localhost"
assert sum(sub["records_out"] for sub in ops["gen"]["subtasks"]) > 0, ops["gen"]
PY
run_expect 0 "$STREAMCTL" status endless
assert_contains "$WORK/out" "gen (generator) x2"
run_expect 0 "$STREAMCTL" stop endless
set +e; wait $pid; code=$?; set -e
assert_eq 0 "$code" "exit code of a job stopped by streamctl stop"
assert_contains "$WORK/run-err" "stop requested"
[[ $(cat "$WORK/committed"/part-* | wc -l) -gt 0 ]] || fail "a stopped job committed nothing"
run_expect 0 "$STREAMCTL" list --json
assert_contains "$WORK/out" '"state":"stopped"'
assert_no_processes_left

# cancel: at once, nothing committed.
rm -rf "$WORK/committed"
"$STREAMCTL" -v run "$WORK/p.toml" 2>"$WORK/run-err" &
pid=$!
wait_for_text "$WORK/run-err" "records flowing"
id=$(python3 -c 'import json, sys, glob
for p in glob.glob(sys.argv[1] + "/jobs/*/job.json"):
    j = json.load(open(p))
    if j["state"] == "running": print(j["id"])' "$STREAMCTL_STATE_DIR")
# Two jobs are named "endless" now; the one that runs is the one meant.
run_expect 0 "$STREAMCTL" status endless
assert_contains "$WORK/out" "job $id (endless): running"
run_expect 0 "$STREAMCTL" cancel "$id"
set +e; wait $pid; code=$?; set -e
assert_eq 1 "$code" "exit code of a cancelled job"
assert_contains "$WORK/run-err" "cancelled"
[[ -z "$(ls "$WORK/committed" 2>/dev/null | grep -v '^\.' || true)" ]] || fail "a cancelled job committed output"
run_expect 0 "$STREAMCTL" status "$id" --json
assert_contains "$WORK/out" '"state":"cancelled"'
run_expect 2 "$STREAMCTL" stop "$id"
assert_contains "$WORK/err" "is not running (it is cancelled)"
assert_no_processes_left

# Requests while the sinks publish the job's last output (here into a reader that stalls):
# the coordinator read no client then, and dropped what came, so `rescale` waited its whole
# half hour (a loaded CI run of rescale_keep met that as its job ended). Now each is answered:
# status says running, a savepoint or rescale is refused (exit 1: the job is finishing),
# `stop --drain` is told the job ends by itself, and `cancel` ends it (exit 1).
start_stalled_publisher "$WORK/run-err"
run_expect 0 timeout 30 "$STREAMCTL" status publishing
assert_contains "$WORK/out" "running"
run_expect 1 timeout 30 "$STREAMCTL" rescale publishing --parallelism 2
assert_contains "$WORK/err" "the job has read all its input and is finishing"
run_expect 1 timeout 30 "$STREAMCTL" savepoint publishing
assert_contains "$WORK/err" "the job has read all its input and is finishing"
run_expect 0 timeout 30 "$STREAMCTL" stop publishing --drain
assert_contains "$WORK/run-err" "the job has read all its input and is finishing"
run_expect 0 timeout 30 "$STREAMCTL" cancel publishing
set +e; wait_exit $pid 30; code=$?; set -e
kill $reader 2>/dev/null || true
assert_eq 1 "$code" "exit code of a job cancelled while its sinks publish"
run_expect 0 "$STREAMCTL" status publishing --json
assert_contains "$WORK/out" '"state":"cancelled"'
assert_no_processes_left

# A request whose coordinator dies before it answers (kill -9): the client waited out its
# whole bound (half an hour for a rescale). Now it notices within a second and exits 2.
"$STREAMCTL" -v run "$WORK/p.toml" 2>"$WORK/run-err" &
pid=$!
wait_for_text "$WORK/run-err" "records flowing"
kill -STOP $pid # it reads no request now
"$STREAMCTL" rescale endless --parallelism 1 >"$WORK/out" 2>"$WORK/err" &
client=$!
sleep 1
kill -9 $pid
set +e; wait_exit $client 15; code=$?; wait $pid 2>/dev/null; set -e
assert_eq 2 "$code" "exit code of a rescale whose coordinator was killed before it answered"
assert_contains "$WORK/err" "ended before it answered"
assert_no_processes_left

# run --detach: the id on stdout at once, the job on in the background, its log in its
# directory; a pipeline that does not validate fails in the foreground, exit 2.
run_expect 0 "$STREAMCTL" -v run "$WORK/p.toml" --detach
id=$(cat "$WORK/out")
[[ $id == endless-* ]] || fail "run --detach printed '$id', not a job id"
# A stop before the first record would rightly commit nothing; wait until records flow.
wait_for_text "$STREAMCTL_STATE_DIR/jobs/$id/log" "records flowing"
run_expect 0 "$STREAMCTL" status "$id" --json
assert_contains "$WORK/out" '"state":"running"'
run_expect 0 "$STREAMCTL" stop "$id"
for _ in $(seq 100); do
  grep -q '"state": "stopped"' "$STREAMCTL_STATE_DIR/jobs/$id/job.json" && break
  sleep 0.1
done
assert_contains "$STREAMCTL_STATE_DIR/jobs/$id/job.json" '"state": "stopped"'
assert_contains "$STREAMCTL_STATE_DIR/jobs/$id/log" "stop requested"
[[ $(cat "$WORK/committed"/part-* | wc -l) -gt 0 ]] || fail "the detached job committed nothing"
printf 'name = "bad"\n[sources.x]\ntype = "nope"\n' >"$WORK/bad.toml"
run_expect 2 "$STREAMCTL" run "$WORK/bad.toml" --detach
assert_contains "$WORK/err" "unknown source type"
assert_no_processes_left
echo ok
