#!/usr/bin/env bash
# Bad [cluster] input (issue 8, "Bad input"): an unreachable host, a host name that does not
# resolve, a wrong binary path, a binary of another version, too few slots, the slurm
# launcher outside an allocation where Slurm cannot give one (no slurmctld runs here) and an
# unknown launcher each end `streamctl run` with exit 2 and a
# message naming the host and the cause, before anything starts, and leave nothing running
# on any host.
source "$SOURCE_DIR/tests/e2e/lib/common.bash"
source "$SOURCE_DIR/tests/hosts/lib/hosts.bash"
hosts_require
hosts_up 3
host_stop_sshd h3

make_clicks 100 >"$WORK/clicks.jsonl"
job() { # CLUSTER-LINES
  cat <<TOML
name = "bad-hosts"
parallelism = 2
[cluster]
$1
[sources.in]
type = "file"
path = "$WORK/clicks.jsonl"
shared = true
[operators.per_user]
type = "reduce"
inputs = ["in"]
key = ["user"]
aggregates = { n = "count()" }
[sinks.out]
type = "stdout"
inputs = ["per_user"]
TOML
}
opts="ssh_options = [\"-F\", \"$HOSTS_SSH_CONFIG\", \"-o\", \"ConnectTimeout=5\"]"

expect_refused() { # NAME CLUSTER-LINES TEXT...
  local name=$1 cluster=$2
  shift 2
  job "$cluster" >"$WORK/$name.toml"
  run_expect 2 "$STREAMCTL" run "$WORK/$name.toml"
  local text
  for text in "$@"; do assert_contains "$WORK/err" "$text"; done
  [[ -s "$WORK/out" ]] && fail "$name: the refused job wrote output"
  for host in h1 h2; do host_wait_only_sshd "$host" 5 || fail "$name: processes left on $host: $(host_pids "$host")"; done
  assert_no_processes_left
  echo "$name: refused"
}

expect_refused unreachable "hosts = [\"h1\", \"h3\"]
$opts" "host 'h3'" "unreachable"
expect_refused unresolvable "hosts = [\"h1\", \"no-such-host.invalid\"]
$opts" "host 'no-such-host.invalid'" "unreachable"
expect_refused wrong_binary "hosts = [\"h1\", \"h2\"]
$opts
binary = \"/nonexistent/streamctl\"" "host 'h1'" "no streamctl at '/nonexistent/streamctl'"

# A streamctl of another version: what `probe` prints, with another version.
"$STREAMCTL" probe >"$WORK/probe.out"
sed 's/^version=.*/version=0.0.1-other/' "$WORK/probe.out" >"$WORK/other.probe"
cat >"$WORK/other-streamctl" <<SH
#!/bin/sh
[ "\$1" = probe ] && { cat '$WORK/other.probe'; echo "coordinator_address=\${SSH_CONNECTION%% *}"; exit 0; }
exit 3
SH
grep -v '^coordinator_address=' "$WORK/other.probe" >"$WORK/other.probe.tmp" && mv "$WORK/other.probe.tmp" "$WORK/other.probe"
chmod +x "$WORK/other-streamctl"
expect_refused other_version "hosts = [\"h1\", \"h2\"]
$opts
binary = \"$WORK/other-streamctl\"" "is version 0.0.1-other" "ship_binary = true"

expect_refused too_few_slots "hosts = [{ host = \"h1\", slots = 1 }, { host = \"h2\", slots = 1 }]
$opts" "cannot place the job"
expect_refused slurm 'launcher = "slurm"' 'allocation'
expect_refused unknown_launcher 'launcher = "kubernetes"' "launcher"
echo "bad_hosts: ok"
