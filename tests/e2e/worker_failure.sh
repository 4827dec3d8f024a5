# A worker that dies fails the job with exit 1 and a message naming its operators; the other
# workers are stopped; kill -9 of the coordinator leaves no worker behind.
source "$(dirname "$0")/lib/common.bash"

cat >"$WORK/p.toml" <<TOML
name = "victim"
[sources.gen]
type = "generator"
rate = 5000
[operators.pass]
type = "filter"
inputs = ["gen"]
where = "true"
parallelism = 2
[sinks.out]
type = "file"
inputs = ["pass"]
path = "$WORK/out"
TOML

job_pids() {
  python3 - "$STREAMCTL_STATE_DIR" "$1" <<'PY'
import json, sys, glob
for path in glob.glob(sys.argv[1] + "/jobs/*/job.json"):
    job = json.load(open(path))
    if job["state"] == "running":
        for t in job["tasks"]:
            # Not a pid of 0 or none (a worker not ready yet): `kill -9 0` kills the test.
            if sys.argv[2] in t["task"] and t["pid"]:
                print(t["pid"])
PY
}

"$STREAMCTL" run "$WORK/p.toml" 2>"$WORK/err" &
pid=$!
victim=""
for _ in $(seq 50); do
  victim=$(job_pids "pass[1]" || true)
  [[ -n "$victim" ]] && break
  sleep 0.1
done
[[ -n "$victim" ]] || fail "no worker for pass[1] found in job.json"
sleep 0.5
kill -9 "$victim"
set +e
wait $pid
code=$?
set -e
assert_eq 1 "$code" "exit code after a worker died"
assert_contains "$WORK/err" "pass[1]"
assert_contains "$WORK/err" "killed by signal 9"
assert_no_processes_left
[[ -z "$(ls "$WORK/out" 2>/dev/null | grep -v '^\.' || true)" ]] || fail "a failed job committed output"
python3 -c 'import json,sys,glob; s=[json.load(open(p))["state"] for p in glob.glob(sys.argv[1]+"/jobs/*/job.json")]; assert s==["failed"], s' "$STREAMCTL_STATE_DIR" \
  || fail "job.json does not say failed"

# kill -9 of the coordinator: the workers notice and exit.
"$STREAMCTL" run "$WORK/p.toml" 2>"$WORK/err" &
pid=$!
for _ in $(seq 50); do
  [[ -n "$(job_pids "pass[0]" || true)" ]] && break
  sleep 0.1
done
sleep 0.5
[[ -n "$(pgrep -f -- "$STREAMCTL_STATE_DIR" || true)" ]] || fail "no workers running"
kill -9 $pid
wait $pid 2>/dev/null || true
assert_no_processes_left
echo ok
