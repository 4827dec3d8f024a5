#!/usr/bin/env bash
# [cluster] ship_binary = true (SPEC §9): hosts whose disks hold no streamctl (each host's
# cache directory is a private tmpfs) get the coordinator's own binary copied once, by content
# hash, and run the job with it; the output equals the job on one host, and a second run
# copies nothing.
source "$SOURCE_DIR/tests/e2e/lib/common.bash"
source "$SOURCE_DIR/tests/hosts/lib/hosts.bash"
hosts_require
cache="${XDG_CACHE_HOME:-$HOME/.cache}"
mkdir -p "$cache"
HOSTS_PRIVATE_DIRS="$cache"
hosts_up 2

make_clicks 5000 >"$WORK/clicks.jsonl"
job() { # CLUSTER
  cat <<TOML
name = "shipped"
parallelism = 2
$1
[sources.in]
type = "file"
path = "$WORK/clicks.jsonl"
shared = true
[operators.per_user]
type = "reduce"
inputs = ["in"]
key = ["user"]
aggregates = { n = "count()", bytes = "sum(bytes)" }
[sinks.out]
type = "stdout"
inputs = ["per_user"]
TOML
}
job "" >"$WORK/local.toml"
job "[cluster]
hosts = [\"h1\", \"h2\"]
ssh_options = [\"-F\", \"$HOSTS_SSH_CONFIG\"]
ship_binary = true" >"$WORK/shipped.toml"

run_expect 0 "$STREAMCTL" run "$WORK/local.toml"
canonical <"$WORK/out" >"$WORK/expected"
for attempt in first second; do
  run_expect 0 "$STREAMCTL" -v run "$WORK/shipped.toml"
  canonical <"$WORK/out" >"$WORK/got-$attempt"
  cmp -s "$WORK/expected" "$WORK/got-$attempt" || fail "$attempt run with a shipped binary gave other output"
  copies=$(grep -c "copied streamctl to" "$WORK/err" || true)
  if [[ $attempt == first ]]; then
    assert_eq 2 "$copies" "copies to the two hosts on the first run"
    assert_contains "$WORK/err" "copied streamctl to h1:"
  else
    assert_eq 0 "$copies" "copies on the second run (the hosts have it)"
  fi
done
# The copy is on each host's own disk.
for host in h1 h2; do
  host_exec "$host" sh -c "ls '$cache/streamctl/'streamctl-*" >/dev/null || fail "no shipped binary on $host"
done
for host in h1 h2; do host_wait_only_sshd "$host" 10 || fail "processes left on $host: $(host_pids "$host")"; done
assert_no_processes_left
echo "ship_binary: ok"
