#!/usr/bin/env bash
# kill -9 of the coordinator (the `streamctl run` process) of a job running on three namespace
# hosts leaves no process on any host, nor on the coordinator's own, within the job's heartbeat
# timeout: a remote worker sees EOF on its bootstrap channel (its ssh's stdin) at once, and
# would otherwise end itself when the coordinator's heartbeat stops.
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

"$STREAMCTL" -v run "$WORK/job.toml" 2>"$WORK/run.log" &
coordinator=$!
disown "$coordinator" # its death by kill -9 is the point, not news
wait_for_text "$WORK/run.log" "records flowing" 60
deadline=$((SECONDS + 60))
until compgen -G "$WORK/ck/coordinator-kill/chk-*/_metadata" >/dev/null; do
  ((SECONDS < deadline)) || fail "no checkpoint completed: $(tail -5 "$WORK/run.log")"
  sleep 0.05
done
grep "placement: " "$WORK/run.log" | sed 's/.*placement: /placement: /' | tee "$WORK/placement"
for host in h1 h2 h3; do
  assert_contains "$WORK/placement" "$host: "
  [[ -n "$(host_pids "$host" | grep -vx "${HOSTS_SSHD_PID[$host]}")" ]] || fail "no worker runs on $host"
done

kill -9 "$coordinator"
killed_at=$EPOCHREALTIME
since_kill() { awk -v now="$EPOCHREALTIME" -v then="$killed_at" 'BEGIN { printf "%.2f", now - then }'; }

# Every host and this one must be empty by the heartbeat timeout (plus a little for a loaded
# machine to reap): a worker kept alive only until its heartbeat times out is still on time.
for host in h1 h2 h3; do
  left=$(awk -v s="$(since_kill)" -v t="$HEARTBEAT_TIMEOUT" 'BEGIN { l = int(t + 2 - s + 0.999); print (l < 1 ? 1 : l) }')
  host_wait_only_sshd "$host" "$left" || fail "processes left on $host after kill -9 of the coordinator"
  echo "$host empty $(since_kill)s after kill -9 of the coordinator"
done
assert_no_processes_left
echo "coordinator_kill: ok"
