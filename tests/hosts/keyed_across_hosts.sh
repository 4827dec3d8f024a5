#!/usr/bin/env bash
# A keyed window job on three hosts ([cluster] launcher = "ssh", real sshd in network
# namespaces) gives exactly the output of the same job on one host; CURVE is on, and nothing
# is left running on any host afterwards. The file source is `shared` (the namespaces share
# this machine's filesystem, as hosts share an NFS mount), so its readers spread over the hosts
# too; the stdout sink runs on the coordinator's host.
source "$SOURCE_DIR/tests/e2e/lib/common.bash"
source "$SOURCE_DIR/tests/hosts/lib/hosts.bash"
hosts_require
hosts_up 3

python3 - >"$WORK/events.jsonl" <<'PY'
import random
random.seed(8)
for i in range(60000):
    print('{"ts": %d, "k": "key-%d", "v": %d}' % (i * 3, random.randrange(200), random.randrange(1000)))
PY

pipeline() { # $1: extra top-level text ([cluster])
  cat <<TOML
name = "keyed-across-hosts"
parallelism = 3
$1
[sources.in]
type = "file"
path = "$WORK/events.jsonl"
shared = true
event_time = "ts"
[operators.per_key]
type = "window"
inputs = ["in"]
key = ["k"]
window = { kind = "tumbling", size = "5s" }
aggregates = { n = "count()", total = "sum(v)" }
[sinks.out]
type = "stdout"
inputs = ["per_key"]
TOML
}
pipeline "" >"$WORK/local.toml"
pipeline "[cluster]
hosts = [\"h1\", \"h2\", { host = \"h3\", slots = 2 }]
ssh_options = [\"-F\", \"$HOSTS_SSH_CONFIG\"]" >"$WORK/hosts.toml"

"$STREAMCTL" run "$WORK/local.toml" >"$WORK/local.out" 2>"$WORK/local.err" || fail "the job on one host failed: $(tail -3 "$WORK/local.err")"
[[ -s "$WORK/local.out" ]] || fail "the job on one host wrote nothing"

"$STREAMCTL" run -v "$WORK/hosts.toml" >"$WORK/hosts.out" 2>"$WORK/hosts.err" || fail "the job on three hosts failed: $(tail -5 "$WORK/hosts.err")"
assert_contains "$WORK/hosts.err" "links between hosts: CURVE"
cmp -s <(canonical <"$WORK/local.out") <(canonical <"$WORK/hosts.out") ||
  fail "three hosts gave other output than one: $(diff <(canonical <"$WORK/local.out") <(canonical <"$WORK/hosts.out") | head -5)"

# Every host ran some of the job's workers, the stdout sink ran here.
grep "placement: " "$WORK/hosts.err" | sed 's/.*placement: /placement: /' >"$WORK/placement"
cat "$WORK/placement"
for host in h1 h2 h3; do assert_contains "$WORK/placement" "$host: "; done
assert_contains "$WORK/placement" "this host: out[0]"
# `status` from the coordinator's host names each subtask's host and the worker's own pid
# there (not the pid of its ssh here).
sed -e 's/^name = .*/name = "endless-on-hosts"/' -e '/^\[sources.in\]/,/^event_time/c\
[sources.in]\
type = "generator"\
profile = "counter"\
rate = 2000\
event_time = "ts"' "$WORK/hosts.toml" | sed 's/key = \["k"\]/key = ["seq"]/; s/sum(v)/sum(seq)/' >"$WORK/endless.toml"
printf '[checkpoint]\nstorage = "shared"\ndir = "%s"\n' "$WORK/ck" >>"$WORK/endless.toml"
"$STREAMCTL" -v run "$WORK/endless.toml" >/dev/null 2>"$WORK/endless.err" &
job=$!
wait_for_text "$WORK/endless.err" "records flowing" 60
run_expect 0 "$STREAMCTL" status endless-on-hosts --json
python3 - "$WORK/out" "$(host_pids h1 | tr '\n' ' ')" "$(host_pids h2 | tr '\n' ' ')" "$(host_pids h3 | tr '\n' ' ')" <<'PY' || fail "status --json: $(cat "$WORK/out")"
import json, sys
status = json.load(open(sys.argv[1]))
pids = {"h1": set(sys.argv[2].split()), "h2": set(sys.argv[3].split()), "h3": set(sys.argv[4].split())}
seen = set()
for op in status["operators"]:
    for sub in op["subtasks"]:
        host = sub["host"]
        if host == "localhost":
            continue
        assert str(sub["pid"]) in pids[host], (op["name"], sub, pids[host])
        seen.add(host)
assert seen == {"h1", "h2", "h3"}, seen
PY
# A rescale beyond the hosts' slots is refused before its savepoint stops anything.
run_expect 2 "$STREAMCTL" rescale endless-on-hosts --parallelism 4
assert_contains "$WORK/err" "cannot place the job"
run_expect 0 "$STREAMCTL" status endless-on-hosts
kill -TERM "$job"
wait "$job" || true
for host in h1 h2 h3; do host_wait_only_sshd "$host" 10 || fail "processes left on $host: $(host_pids "$host")"; done
assert_no_processes_left

# With storage = "coordinator" (the default with hosts) a savepoint lands on this host, and a
# run on the hosts from it fetches it: the open windows the savepoint holds fire then, so the
# two runs together write what one run writes.
run_expect 0 "$STREAMCTL" run "$WORK/hosts.toml" --savepoint-on-exit
cp "$WORK/out" "$WORK/first-half.out"
savepoint=$(ls -d "$STREAMCTL_STATE_DIR"/checkpoints/keyed-across-hosts/savepoint-* 2>/dev/null | head -1)
[[ -f $savepoint/_metadata ]] || fail "--savepoint-on-exit on three hosts left no savepoint: $(cat "$WORK/err")"
run_expect 0 "$STREAMCTL" run "$WORK/hosts.toml" --from-savepoint "$savepoint"
canonical <"$WORK/local.out" >"$WORK/expected.txt"
cat "$WORK/first-half.out" "$WORK/out" | canonical >"$WORK/two-runs.txt"
cmp -s "$WORK/expected.txt" "$WORK/two-runs.txt" ||
  fail "a run from a savepoint on the coordinator: $(diff "$WORK/expected.txt" "$WORK/two-runs.txt" | head -5)"
for host in h1 h2 h3; do host_wait_only_sshd "$host" 10 || fail "processes left on $host: $(host_pids "$host")"; done
echo "keyed_across_hosts: ok"
