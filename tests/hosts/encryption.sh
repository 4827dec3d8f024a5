#!/usr/bin/env bash
# CURVE on the links between hosts (SPEC §9): traffic captured on the hosts' network holds
# none of the records' plaintext when the job encrypts, and holds it when [cluster]
# encrypt = false (which proves the capture would see it, and is logged loudly); a peer
# without the job's keys that connects to a worker's data port is refused, the refusal is
# logged, and the job's output is unaffected.
source "$SOURCE_DIR/tests/e2e/lib/common.bash"
source "$SOURCE_DIR/tests/hosts/lib/hosts.bash"
hosts_require
command -v tcpdump >/dev/null || hosts_skip "tcpdump is not installed"
hosts_up 2

marker="PLAINTEXT-MARKER-7f3a"
python3 - "$marker" >"$WORK/events.jsonl" <<'PY'
import sys
for i in range(40000):
    print('{"ts": %d, "k": "%s-%d", "v": %d}' % (i, sys.argv[1], i % 50, i % 7))
PY

pipeline() { # $1: encrypt, $2: source part
  cat <<TOML
name = "encryption"
parallelism = 2
[cluster]
hosts = ["h1", "h2"]
ssh_options = ["-F", "$HOSTS_SSH_CONFIG"]
encrypt = $1
$2
[operators.per_key]
type = "reduce"
inputs = ["in"]
key = ["k"]
aggregates = { n = "count()" }
[sinks.out]
type = "stdout"
inputs = ["per_key"]
TOML
}
file_source="[sources.in]
type = \"file\"
path = \"$WORK/events.jsonl\"
shared = true"

# Runs the file job with `encrypt` while tcpdump captures the bridge; prints how many captured
# packets hold the marker.
captured_markers() {
  local encrypt=$1
  pipeline "$encrypt" "$file_source" >"$WORK/p-$encrypt.toml"
  tcpdump -i "$HOSTS_BRIDGE" -U -s 0 -w "$WORK/cap-$encrypt.pcap" tcp 2>"$WORK/tcpdump-$encrypt.err" &
  local dump=$!
  wait_for_text "$WORK/tcpdump-$encrypt.err" "listening on" 20
  "$STREAMCTL" run "$WORK/p-$encrypt.toml" >"$WORK/out-$encrypt" 2>"$WORK/err-$encrypt" ||
    { kill "$dump"; fail "the job with encrypt = $encrypt failed: $(tail -3 "$WORK/err-$encrypt")"; }
  sleep 1 # let tcpdump write the last packets
  kill -INT "$dump"
  wait "$dump" || true
  tcpdump -r "$WORK/cap-$encrypt.pcap" -A 2>/dev/null | grep -c -- "$marker" || true
}

plain=$(captured_markers false)
assert_contains "$WORK/err-false" "NOT encrypted"
(( plain > 0 )) || fail "the capture of the unencrypted job holds no plaintext: the capture sees nothing"
encrypted=$(captured_markers true)
assert_eq 0 "$encrypted" "captured packets holding a record's plaintext with encryption on"
cmp -s <(canonical <"$WORK/out-false") <(canonical <"$WORK/out-true") || fail "the outputs with and without encryption differ"
assert_eq 40000 "$(wc -l <"$WORK/out-true" | tr -d ' ')" "output rows"

# An intruder: a ZMTP 3.0 peer offering the NULL mechanism (a client without the job's keys)
# connects to every port the workers listen on while a slower job runs.
pipeline true "[sources.in]
type = \"generator\"
profile = \"counter\"
count = 60000
rate = 10000" | sed 's/key = \["k"\]/key = ["seq"]/' >"$WORK/slow.toml"
"$STREAMCTL" run -v "$WORK/slow.toml" >"$WORK/slow.out" 2>"$WORK/slow.err" &
job=$!
wait_for_text "$WORK/slow.err" "records flowing" 60
ports=()
for host in h1 h2; do
  while read -r port; do ports+=("$(host_ip "$host"):$port"); done < <(
    host_exec "$host" ss -ltnH | awk '{print $4}' | grep -v ':22$' | sed 's/.*://')
done
(( ${#ports[@]} > 0 )) || fail "found no worker port to try"
python3 - "${ports[@]}" <<'PY'
import socket, sys
greeting = b"\xff" + b"\0" * 8 + b"\x7f" + bytes([3, 0]) + b"NULL".ljust(20, b"\0") + b"\0" + b"\0" * 31
for target in sys.argv[1:]:
    host, port = target.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=5)
    s.sendall(greeting)
    s.settimeout(5)
    try:
        while s.recv(4096):
            pass
    except OSError:
        pass
    s.close()
PY
wait "$job" || fail "the job failed after the intruder: $(tail -3 "$WORK/slow.err")"
assert_contains "$WORK/slow.err" "refused"
grep -m1 "refused" "$WORK/slow.err"
assert_eq 60000 "$(wc -l <"$WORK/slow.out" | tr -d ' ')" "output rows of the job an intruder tried"
for host in h1 h2; do host_wait_only_sshd "$host" 10 || fail "processes left on $host: $(host_pids "$host")"; done
echo "encryption: ok"
