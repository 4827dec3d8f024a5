#!/usr/bin/env bash
# Losing a host is a worker failure (SPEC §9): a job with checkpoints on three namespace hosts
# has every process of one host killed with -9 (its sshd too), or that host's link cut, after
# its first checkpoint; the coordinator restarts it from its latest checkpoint on the two hosts
# left, and the output equals that of a run without failures: no record lost, none twice.
# Nothing is left running on any host afterwards (a cut host's workers end themselves when
# the coordinator's heartbeat stops). The kill and the cut run with [checkpoint] storage =
# "shared" (a dir every host sees); a second kill with storage = "coordinator", where the
# hosts cannot see the checkpoint dir and the restarted workers fetch the checkpoint from the
# coordinator.
source "$SOURCE_DIR/tests/e2e/lib/common.bash"
source "$SOURCE_DIR/tests/hosts/lib/hosts.bash"
hosts_require
mkdir -p "$WORK/private"
HOSTS_PRIVATE_DIRS="$WORK/private" # the coordinator's checkpoint dir under storage "coordinator"
hosts_up 3

pipeline() { # NAME OUT CLUSTER [STORAGE]
  local storage=${4:-shared}
  cat <<TOML
name = "$1"
parallelism = 2
$3
[checkpoint]
interval = "200ms"
dir = "$(ck_root "$storage")"
storage = "$storage"
[restart]
strategy = "fixed"
delay = "50ms"
max_attempts = 5
heartbeat_timeout = "3s"
[sources.gen]
type = "generator"
profile = "counter"
count = 60000
rate = 12000
event_time = "ts"
[operators.keyed]
type = "map"
inputs = ["gen"]
set = { k = "seq % 37" }
[operators.count_per_key]
type = "window"
inputs = ["keyed"]
key = ["k"]
window = { kind = "tumbling", size = "250ms" }
aggregates = { n = "count()", s = "sum(seq)" }
[operators.running]
type = "reduce"
inputs = ["keyed"]
key = ["k"]
aggregates = { updates = "count()" }
[sinks.out]
type = "file"
inputs = ["count_per_key", "running"]
path = "$2"
TOML
}
ck_root() { # STORAGE
  if [[ $1 == coordinator ]]; then echo "$WORK/private/ck"; else echo "$WORK/ck"; fi
}
cluster="[cluster]
hosts = [{ host = \"h1\", slots = 4 }, { host = \"h2\", slots = 4 }, { host = \"h3\", slots = 4 }]
ssh_options = [\"-F\", \"$HOSTS_SSH_CONFIG\", \"-o\", \"ConnectTimeout=3\"]"

pipeline reference "$WORK/expected" "" >"$WORK/reference.toml"
run_expect 0 "$STREAMCTL" run "$WORK/reference.toml" --set sources.gen.rate=0 --set checkpoint.interval=0
cat "$WORK/expected"/part-* | canonical >"$WORK/expected.txt"

# Runs job NAME on the hosts, does FAULT to host VICTIM once its first checkpoint is complete,
# and checks the job's exit code, its restart on the hosts left and its output.
lose_host() { # NAME VICTIM FAULT [STORAGE]
  local name=$1 victim=$2 fault=$3 storage=${4:-shared}
  local ck
  ck=$(ck_root "$storage")
  pipeline "$name" "$WORK/got-$name" "$cluster" "$storage" >"$WORK/$name.toml"
  "$STREAMCTL" -v run "$WORK/$name.toml" 2>"$WORK/$name.log" &
  local pid=$!
  wait_for_text "$WORK/$name.log" "records flowing" 60
  local deadline=$((SECONDS + 60))
  until compgen -G "$ck/$name/chk-*/_metadata" >/dev/null; do
    ((SECONDS < deadline)) || fail "$name: no checkpoint completed"
    sleep 0.05
  done
  "$fault" "$victim"
  echo "$name: $fault $victim"
  set +e; wait $pid; local code=$?; set -e
  [[ $fault == host_cut ]] && host_restore "$victim"
  assert_eq 0 "$code" "$name: exit code of a job that lost a host ($(tail -3 "$WORK/$name.log"))"
  assert_contains "$WORK/$name.log" "lost host '$victim'"
  assert_contains "$WORK/$name.log" "from $ck/$name/chk-"
  grep "placement: " "$WORK/$name.log" | tail -1 | sed 's/.*placement: //' >"$WORK/$name.placement"
  cat "$WORK/$name.placement"
  grep -q "$victim: " "$WORK/$name.placement" && fail "$name: the job restarted on the lost host $victim"
  cat "$WORK/got-$name"/part-* | canonical >"$WORK/got-$name.txt"
  if ! cmp -s "$WORK/expected.txt" "$WORK/got-$name.txt"; then
    diff "$WORK/expected.txt" "$WORK/got-$name.txt" | head -10 >&2
    fail "$name: the output after losing $victim differs from the output without failures"
  fi
  for host in h1 h2 h3; do
    [[ $fault == host_kill_all && $host == "$victim" ]] && continue
    host_wait_only_sshd "$host" 15 || fail "$name: processes left on $host: $(host_pids "$host")"
  done
  assert_no_processes_left
}

lose_host killed h1 host_kill_all
# h1 comes back (its sshd again) before the next job, which needs all three at its start.
hosts_start_sshd h1
deadline=$((SECONDS + 30))
until ssh -F "$HOSTS_SSH_CONFIG" -o BatchMode=yes h1 true 2>/dev/null; do
  ((SECONDS < deadline)) || fail "h1's sshd did not come back"
  sleep 0.2
done
lose_host cut h2 host_cut
# h2 is back (host_restore); h3 goes with storage "coordinator".
lose_host killed-coordinator-storage h3 host_kill_all coordinator
for host in h1 h2; do
  [[ -z $(host_exec "$host" ls -A "$WORK/private") ]] || fail "$host wrote into its own $WORK/private"
done
echo "host_loss: ok"
