#!/usr/bin/env bash
# [cluster] ship_binary = true: the coordinator copies its own binary over ssh to a cache
# directory on each host (by content hash) and the workers there run that copy. Each namespace
# host has a private /root/.cache (the ssh launcher's default cache, ~/.cache/streamctl), so
# the copy lands on the host's own disk, not on this one. The job's output equals that of the
# same job on one host, and a second run copies nothing: the log says no copy, and the file on
# each host keeps its inode and mtime. The hosts do not see this streamctl's own directory (a
# private empty one there too), so the workers can run only the shipped copy: without
# ship_binary the same job is refused naming the missing streamctl.
source "$SOURCE_DIR/tests/e2e/lib/common.bash"
source "$SOURCE_DIR/tests/hosts/lib/hosts.bash"
hosts_require
mkdir -p /root/.cache
STREAMCTL=$(realpath "$STREAMCTL")
HOSTS_PRIVATE_DIRS="/root/.cache $(dirname "$STREAMCTL")"
hosts_up 3

cache=/root/.cache/streamctl
local_copy_before=$(ls "$cache" 2>/dev/null | grep -c '^streamctl-' || true)

python3 - >"$WORK/events.jsonl" <<'PY'
import random
random.seed(11)
for i in range(30000):
    print('{"ts": %d, "k": "key-%d", "v": %d}' % (i * 3, random.randrange(100), random.randrange(1000)))
PY

pipeline() { # NAME CLUSTER
  cat <<TOML
name = "$1"
parallelism = 3
$2
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
pipeline one-host "" >"$WORK/local.toml"
pipeline shipped "[cluster]
hosts = [\"h1\", \"h2\", \"h3\"]
ship_binary = true
ssh_options = [\"-F\", \"$HOSTS_SSH_CONFIG\"]" >"$WORK/hosts.toml"

"$STREAMCTL" run "$WORK/local.toml" >"$WORK/local.out" 2>"$WORK/local.err" || fail "the job on one host failed: $(tail -3 "$WORK/local.err")"
canonical <"$WORK/local.out" >"$WORK/expected.txt"
[[ -s "$WORK/expected.txt" ]] || fail "the job on one host wrote nothing"

# The hosts' caches start empty (their own tmpfs), and they have no streamctl at this one's path.
for host in h1 h2 h3; do
  [[ -z "$(host_exec "$host" sh -c "ls -A /root/.cache")" ]] || fail "$host's /root/.cache is not empty at the start"
  host_exec "$host" test ! -e "$STREAMCTL" || fail "$host sees $STREAMCTL"
done
sed '/^ship_binary/d' "$WORK/hosts.toml" >"$WORK/not-shipped.toml"
run_expect 2 "$STREAMCTL" run "$WORK/not-shipped.toml"
for host in h1 h2 h3; do
  assert_contains "$WORK/err" "host '$host': no streamctl at '$STREAMCTL'"
done

# shipped_file HOST: "path inode mtime" of the one binary in the host's cache.
shipped_file() {
  host_exec "$1" sh -c 'for f in /root/.cache/streamctl/streamctl-*; do stat -c "%n %i %Y.%y" "$f"; done'
}

for round in 1 2; do
  started=$EPOCHREALTIME
  "$STREAMCTL" -v run "$WORK/hosts.toml" >"$WORK/run-$round.out" 2>"$WORK/run-$round.log" ||
    fail "round $round: the job with ship_binary failed: $(tail -5 "$WORK/run-$round.log")"
  echo "round $round: $(awk -v a="$started" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')s"
  grep -E "copied streamctl|placement: " "$WORK/run-$round.log" | sed 's/^.*\] //' || true
  canonical <"$WORK/run-$round.out" >"$WORK/got-$round.txt"
  if ! cmp -s "$WORK/expected.txt" "$WORK/got-$round.txt"; then
    diff "$WORK/expected.txt" "$WORK/got-$round.txt" | head -5 >&2
    fail "round $round: the job on three hosts with a shipped binary gave other output than on one host"
  fi
  for host in h1 h2 h3; do
    assert_contains <(grep "placement: " "$WORK/run-$round.log") "$host: "
    file=$(shipped_file "$host")
    [[ $(wc -l <<<"$file") == 1 && -n "$file" ]] || fail "round $round: $host's cache holds [$file], not one binary"
    path=${file%% *}
    [[ $path =~ ^$cache/streamctl-[0-9a-f]{32}$ ]] || fail "$host: shipped as $path, not by a content hash"
    host_exec "$host" cat "$path" | cmp -s - "$STREAMCTL" || fail "$host: $path is not this streamctl"
    if [[ $round == 1 ]]; then
      assert_contains "$WORK/run-1.log" "copied streamctl to $host:$path"
      printf '%s\n' "$file" >"$WORK/$host.file"
    else
      grep -F "copied streamctl to $host:" "$WORK/run-2.log" && fail "round 2 copied the binary to $host again"
      assert_eq "$(cat "$WORK/$host.file")" "$file" "$host: the shipped binary (path inode mtime) after the second run"
    fi
    host_wait_only_sshd "$host" 10 || fail "round $round: processes left on $host"
  done
done

# The copies went to the hosts' own disks, not to this machine's cache.
assert_eq "$local_copy_before" "$(ls "$cache" 2>/dev/null | grep -c '^streamctl-' || true)" \
  "binaries in this machine's $cache"
assert_no_processes_left
echo "ship_binary: ok"
