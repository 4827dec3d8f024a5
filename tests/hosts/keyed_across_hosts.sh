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

for host in h1 h2 h3; do host_wait_only_sshd "$host" 10 || fail "processes left on $host: $(host_pids "$host")"; done
assert_no_processes_left
echo "keyed_across_hosts: ok"
