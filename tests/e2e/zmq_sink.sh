# The zmq sink against python3-zmq peers (lib/sink_peers.py). PUSH: exact messages, and a
# PULL peer that binds 2 s after the job starts loses nothing (PUSH blocks: backpressure).
# PUB: a subscriber gets every message from the first it receives on, and with no subscriber
# the job still ends (PUB drops). A wrong socket type is a validation error with its position.
source "$(dirname "$0")/lib/common.bash"
zmq_python >/dev/null || { echo "python3-zmq is not installed: skipped"; exit 77; }

pipeline() { # NAME SOCKET ENDPOINT COUNT RATE
  cat <<TOML
name = "$1"
[sources.gen]
type = "generator"
profile = "counter"
count = $4
rate = $5
[sinks.out]
type = "zmq"
inputs = ["gen"]
socket = "$2"
endpoint = "$3"
TOML
}

cat >"$WORK/reference.toml" <<TOML
name = "reference"
[sources.gen]
type = "generator"
profile = "counter"
count = 5000
[sinks.out]
type = "stdout"
inputs = ["gen"]
TOML
"$STREAMCTL" run "$WORK/reference.toml" >"$WORK/expected"

# PUSH to a PULL peer that binds: every message, in order.
endpoint="tcp://127.0.0.1:$(free_port)"
start_peer pull "$endpoint" "$WORK/push.out"
pipeline push PUSH "$endpoint" 5000 0 >"$WORK/push.toml"
run_expect 0 "$STREAMCTL" run "$WORK/push.toml"
wait_for_lines "$WORK/push.out" 5000
cmp "$WORK/expected" "$WORK/push.out" || fail "the PULL peer did not get exactly the generator's records"
kill "$PEER_PID"

# PUSH with the peer 2 s late: the job waits (ZeroMQ queues up to its high-water mark, then
# blocks), and the peer gets everything.
endpoint="tcp://127.0.0.1:$(free_port)"
pipeline late PUSH "$endpoint" 5000 5000 >"$WORK/late.toml"
"$STREAMCTL" run "$WORK/late.toml" 2>"$WORK/late.log" &
job=$!
sleep 2
kill -0 $job 2>/dev/null || fail "the job did not wait for its PUSH peer ($(tail -3 "$WORK/late.log"))"
start_peer pull "$endpoint" "$WORK/late.out"
set +e; wait $job; code=$?; set -e
assert_eq 0 "$code" "exit status of a PUSH job whose peer came late"
wait_for_lines "$WORK/late.out" 5000
cmp "$WORK/expected" "$WORK/late.out" || fail "records were lost while the PULL peer was missing"
kill "$PEER_PID"

# PUB to a subscriber: what it gets is every message from its first on (ZeroMQ drops only
# what came before the subscription arrived).
endpoint="tcp://127.0.0.1:$(free_port)"
start_peer sub "$endpoint" "$WORK/pub.out"
pipeline pub PUB "$endpoint" 5000 5000 >"$WORK/pub.toml"
run_expect 0 "$STREAMCTL" run "$WORK/pub.toml"
sleep 0.5
python3 - "$WORK/pub.out" <<'PY' || fail "the subscriber missed messages after its first"
import json, sys
seqs = [json.loads(l)["seq"] for l in open(sys.argv[1])]
assert len(seqs) >= 2500, f"only {len(seqs)} messages"
assert seqs == list(range(seqs[0], 5000)), f"not every message from {seqs[0]} to 4999"
PY
kill "$PEER_PID"

# PUB with no subscriber at all: nothing blocks, the job ends.
endpoint="tcp://127.0.0.1:$(free_port)"
pipeline lonely PUB "$endpoint" 20000 0 >"$WORK/lonely.toml"
run_expect 0 timeout 20 "$STREAMCTL" run "$WORK/lonely.toml"

# PUSH to a peer that never comes: the end of the job waits `linger` for the queued messages,
# then drops them, and says so. The port is held by a socket that never listens (connections
# to it are refused): one from free_port is free only when asked, and a test running beside
# this one once bound its own PULL peer to it and took the messages.
python3 -c 'import socket, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1], flush=True)
time.sleep(120)' >"$WORK/held_port" &
held=$!
until [[ -s $WORK/held_port ]]; do sleep 0.05; done
endpoint="tcp://127.0.0.1:$(cat "$WORK/held_port")"
pipeline nobody PUSH "$endpoint" 10 0 >"$WORK/nobody.toml"
echo 'linger = "300ms"' >>"$WORK/nobody.toml"
run_expect 0 timeout 20 "$STREAMCTL" run "$WORK/nobody.toml"
kill $held
assert_contains "$WORK/err" "sink 'out': messages were still queued for '$endpoint' when \`linger\` (300 ms) ran out"

# Validation: a socket type the sink does not have, a missing endpoint.
pipeline bad PULL "$endpoint" 10 0 >"$WORK/bad_socket.toml"
run_expect 2 "$STREAMCTL" validate "$WORK/bad_socket.toml"
assert_contains "$WORK/err" "$WORK/bad_socket.toml:10:10:"
assert_contains "$WORK/err" "PUSH"
pipeline bad PUSH "$endpoint" 10 0 | grep -v '^endpoint' >"$WORK/no_endpoint.toml"
run_expect 2 "$STREAMCTL" validate "$WORK/no_endpoint.toml"
assert_contains "$WORK/err" "endpoint"
assert_contains "$WORK/err" "$WORK/no_endpoint.toml:7:"
assert_no_processes_left
echo ok
