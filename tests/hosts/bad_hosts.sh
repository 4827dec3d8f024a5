#!/usr/bin/env bash
# Bad [cluster] input (issue 8, "Bad input"): an unreachable host, a host name that does not
# resolve, a wrong `binary` path, a `binary` that is another version of streamctl, too few
# slots for the job, the slurm launcher (not available yet) and an unknown launcher. Each is
# refused by `streamctl run` with exit 2 before anything starts, the message names the host
# and the cause, and nothing is left running on any host or here.
source "$SOURCE_DIR/tests/e2e/lib/common.bash"
source "$SOURCE_DIR/tests/hosts/lib/hosts.bash"
hosts_require
hosts_up 3
host_stop_sshd h3

# A streamctl that answers `probe` as a streamctl of another version would.
cat >"$WORK/other-version" <<'SH'
#!/bin/sh
if [ "$1" = probe ]; then
  printf 'version=0.0.1-other\nprotocol=999\ncores=4\nhostname=%s\n' "$(hostname)"
  exit 0
fi
echo "other-version streamctl: not started for '$1'" >&2
exit 1
SH
chmod +x "$WORK/other-version"

pipeline() { # CLUSTER [PARALLELISM]
  cat <<TOML
name = "bad-hosts"
parallelism = ${2:-2}
$1
[sources.gen]
type = "generator"
profile = "counter"
count = 100000
rate = 1000
event_time = "ts"
[operators.keyed]
type = "map"
inputs = ["gen"]
set = { k = "seq % 7" }
[operators.per_key]
type = "reduce"
inputs = ["keyed"]
key = ["k"]
aggregates = { n = "count()" }
[sinks.out]
type = "file"
inputs = ["per_key"]
path = "$WORK/out-dir"
shared = true
TOML
}
ssh_options="ssh_options = [\"-F\", \"$HOSTS_SSH_CONFIG\", \"-o\", \"ConnectTimeout=3\"]"

# refused NAME CLUSTER PARALLELISM TEXT...: `run` exits 2 naming TEXT, and nothing started.
refused() {
  local name=$1 cluster=$2 parallelism=$3
  shift 3
  pipeline "$cluster" "$parallelism" >"$WORK/$name.toml"
  local started=$EPOCHREALTIME
  run_expect 2 "$STREAMCTL" run "$WORK/$name.toml"
  echo "$name ($(awk -v a="$started" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')s): $(head -c 600 "$WORK/err" | tr '\n' ' ')"
  local text
  for text in "$@"; do assert_contains "$WORK/err" "$text"; done
  [[ ! -e "$WORK/out-dir" ]] || fail "$name: the sink's output exists: the job started"
  grep -q "records flowing" "$WORK/err" && fail "$name: records flowed"
  local host
  for host in h1 h2; do host_wait_only_sshd "$host" 5 || fail "$name: processes left on $host"; done
  [[ -z "$(host_pids h3)" ]] || fail "$name: processes on h3, whose sshd was stopped: $(host_pids h3)"
  assert_no_processes_left
}

refused unreachable "[cluster]
hosts = [\"h1\", \"h2\", \"h3\"]
$ssh_options" 2 "host 'h3': unreachable over ssh" "Connection refused"

refused unresolvable "[cluster]
hosts = [\"h1\", \"nosuchhost.invalid\"]
$ssh_options" 2 "host 'nosuchhost.invalid': unreachable over ssh" "Could not resolve hostname"

refused wrong_binary "[cluster]
hosts = [\"h1\", \"h2\"]
binary = \"$WORK/no/such/streamctl\"
$ssh_options" 2 "host 'h1'" "host 'h2'" "no streamctl at '$WORK/no/such/streamctl'"

refused other_version "[cluster]
hosts = [\"h1\", \"h2\"]
binary = \"$WORK/other-version\"
$ssh_options" 2 "host 'h1'" "host 'h2'" "is version 0.0.1-other (protocol 999)" \
  "set [cluster] ship_binary = true"

refused too_few_slots "[cluster]
hosts = [{ host = \"h1\", slots = 1 }, { host = \"h2\", slots = 1 }]
$ssh_options" 4 "not enough slots" "the hosts have 2: h1 1, h2 1"

refused slurm "[cluster]
launcher = \"slurm\"" 2 'launcher = "slurm" is not available'

refused unknown_launcher "[cluster]
launcher = \"pbs\"
hosts = [\"h1\"]" 2 "'cluster.launcher' must be one of local, ssh, slurm; got 'pbs'"

echo "bad_hosts: ok"
