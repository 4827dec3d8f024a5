#!/usr/bin/env bash
# A remote worker never outlives its job (SPEC §9): kill -9 of the coordinator of a job on
# three hosts leaves no process on any host within the heartbeat timeout (its ssh clients die
# with it, sshd closes the workers' stdin, and they end on that EOF; the coordinator's silence
# would end them too), and none on this host.
source "$SOURCE_DIR/tests/e2e/lib/common.bash"
source "$SOURCE_DIR/tests/hosts/lib/hosts.bash"
hosts_require
hosts_up 3

cat >"$WORK/endless.toml" <<TOML
name = "orphans"
parallelism = 3
[cluster]
hosts = ["h1", "h2", "h3"]
ssh_options = ["-F", "$HOSTS_SSH_CONFIG"]
[restart]
heartbeat_timeout = "3s"
[sources.gen]
type = "generator"
profile = "counter"
rate = 3000
[operators.per_key]
type = "reduce"
inputs = ["gen"]
key = ["seq"]
aggregates = { n = "count()" }
[sinks.out]
type = "stdout"
inputs = ["per_key"]
TOML

"$STREAMCTL" -v run "$WORK/endless.toml" >/dev/null 2>"$WORK/run.err" &
coordinator=$!
wait_for_text "$WORK/run.err" "records flowing" 60
for host in h1 h2 h3; do
  [[ $(host_pids "$host" | wc -l) -gt 1 ]] || fail "no worker runs on $host"
done
kill -9 "$coordinator"
wait "$coordinator" 2>/dev/null || true
started=$SECONDS
for host in h1 h2 h3; do host_wait_only_sshd "$host" 5 || fail "processes left on $host: $(host_pids "$host")"; done
echo "every host was clear $((SECONDS - started)) s after the coordinator's kill -9"
assert_no_processes_left
echo "coordinator_kill: ok"
