#!/usr/bin/env bash
# kill -9 of the coordinator (the `streamctl run` process) of a job running on three namespace
# hosts leaves no process on any host, nor on the coordinator's own, within the job's heartbeat
# timeout: a remote worker sees EOF on its bootstrap channel (its ssh's stdin) at once, and
# would otherwise end itself when the coordinator's heartbeat stops. That second way is shown
# too: a coordinator frozen with SIGSTOP (its pipes stay open, as in a network partition no
# EOF comes) has every worker gone within the heartbeat timeout and a little.
source "$SOURCE_DIR/tests/e2e/lib/common.bash"
source "$SOURCE_DIR/tests/hosts/lib/hosts.bash"
hosts_require
hosts_up 3

HEARTBEAT_TIMEOUT=3
cat >"$WORK/job.toml" <<TOML
name = "coordinator-kill"
parallelism = 3
[cluster]
hosts = ["h1", "h2", "h3"]
ssh_options = ["-F", "$HOSTS_SSH_CONFIG"]
[checkpoint]
interval = "300ms"
dir = "$WORK/ck"
storage = "shared"
[restart]
heartbeat_timeout = "${HEARTBEAT_TIMEOUT}s"
[sources.gen]
type = "generator"
profile = "counter"
count = 10000000
rate = 2000
event_time = "ts"
[operators.keyed]
type = "map"
inputs = ["gen"]
set = { k = "seq % 41" }
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

# start_job NAME: the job runs on the three hosts, a checkpoint done; $coordinator is its pid.
start_job() {
  local name=$1
  sed "s/^name = .*/name = \"$name\"/" "$WORK/job.toml" >"$WORK/$name.toml"
  "$STREAMCTL" -v run "$WORK/$name.toml" 2>"$WORK/$name.log" &
  coordinator=$!
  disown "$coordinator" # its death by kill -9 is the point, not news
  wait_for_text "$WORK/$name.log" "records flowing" 60
  local deadline=$((SECONDS + 60))
  until compgen -G "$WORK/ck/$name/chk-*/_metadata" >/dev/null; do
    ((SECONDS < deadline)) || fail "$name: no checkpoint completed: $(tail -5 "$WORK/$name.log")"
    sleep 0.05
  done
  grep "placement: " "$WORK/$name.log" | sed 's/.*placement: /placement: /' | tee "$WORK/placement"
  local host
  for host in h1 h2 h3; do
    assert_contains "$WORK/placement" "$host: "
    [[ -n "$(host_pids "$host" | grep -vx "${HOSTS_SSHD_PID[$host]}")" ]] || fail "$name: no worker runs on $host"
  done
}

# all_gone_within SECONDS WHAT: every host empty but for its sshd, SECONDS after $since.
all_gone_within() {
  local limit=$1 what=$2 host left
  for host in h1 h2 h3; do
    left=$(awk -v s="$(since)" -v t="$limit" 'BEGIN { l = int(t - s + 0.999); print (l < 1 ? 1 : l) }')
    host_wait_only_sshd "$host" "$left" || fail "processes left on $host after $what"
    echo "$host empty $(since)s after $what"
  done
}
since() { awk -v now="$EPOCHREALTIME" -v then="$since_at" 'BEGIN { printf "%.2f", now - then }'; }

# kill -9: EOF on every bootstrap channel at once. Every host must be empty by the heartbeat
# timeout (plus a little for a loaded machine to reap).
start_job killed
kill -9 "$coordinator"
since_at=$EPOCHREALTIME
all_gone_within $((HEARTBEAT_TIMEOUT + 2)) "kill -9 of the coordinator"
assert_no_processes_left

# SIGSTOP: no EOF, only silence; the workers go when the heartbeat times out.
start_job frozen
kill -STOP "$coordinator"
since_at=$EPOCHREALTIME
all_gone_within $((HEARTBEAT_TIMEOUT + 5)) "SIGSTOP of the coordinator"
kill -9 "$coordinator"
kill -CONT "$coordinator" 2>/dev/null || true
assert_no_processes_left
echo "coordinator_kill: ok"
