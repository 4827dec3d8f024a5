# The zmq source (issue 11) against a python3-zmq peer: PULL connecting to a PUSH that binds
# (one record per message; of a multipart message the last frame), and SUB binding, with a
# prefix filter, fed by a PUB that connects.
source "$(dirname "$0")/lib/common.bash"
# The peer needs python3-zmq (Debian's, so /usr/bin/python3 when another python3 comes first).
zpy=
for candidate in python3 /usr/bin/python3; do
  if "$candidate" -c 'import zmq' 2>/dev/null; then zpy=$candidate; break; fi
done
[[ -n $zpy ]] || { echo "python3-zmq is not installed: skipped"; exit 77; }

port=$(python3 "$SOURCE_DIR/tests/e2e/lib/free_port.py")
pipeline() { # NAME KEYS
  cat <<TOML
name = "$1"
[sources.in]
type = "zmq"
endpoint = "tcp://127.0.0.1:$port"
end_after_idle = "1500ms"
${2:-}
[sinks.out]
type = "stdout"
inputs = ["in"]
TOML
}

pipeline pull 'socket = "PULL"' >"$WORK/pull.toml"
"$STREAMCTL" run "$WORK/pull.toml" >"$WORK/pull.out" 2>"$WORK/pull.log" &
job=$!
"$zpy" - "$port" <<'PY'
import sys, zmq
ctx = zmq.Context()
s = ctx.socket(zmq.PUSH)
s.bind("tcp://127.0.0.1:%s" % sys.argv[1])
for i in range(10000):
    s.send(b'{"i":%d}' % i)            # blocks until the source has connected
s.send_multipart([b"envelope", b'{"i":10000}'])
s.close(linger=-1)                      # every message handed over before exiting
ctx.term()
PY
set +e; wait $job; code=$?; set -e
assert_eq 0 "$code" "exit code of PULL ($(tail -3 "$WORK/pull.log"))"
python3 -c 'print("\n".join("{\"i\": %d}" % i for i in range(10001)))' | canonical >"$WORK/expected.txt"
canonical <"$WORK/pull.out" | cmp -s - "$WORK/expected.txt" || fail "PULL: records differ ($(wc -l <"$WORK/pull.out") lines)"

pipeline sub 'socket = "SUB"
bind = true
subscribe = ["keep"]' >"$WORK/sub.toml"
"$STREAMCTL" -vv run "$WORK/sub.toml" >"$WORK/sub.out" 2>"$WORK/sub.log" &
job=$!
wait_for_text "$WORK/sub.log" "records flowing"
"$zpy" - "$port" <<'PY'
import sys, time, zmq
ctx = zmq.Context()
s = ctx.socket(zmq.PUB)
s.connect("tcp://127.0.0.1:%s" % sys.argv[1])
time.sleep(1)                           # the subscription reaches the PUB (slow joiner)
for i in range(3000):
    topic = b"keep.a" if i % 3 == 0 else b"drop.b"
    s.send_multipart([topic, b'{"i":%d}' % i])
s.close(linger=-1)
ctx.term()
PY
set +e; wait $job; code=$?; set -e
assert_eq 0 "$code" "exit code of SUB ($(tail -3 "$WORK/sub.log"))"
python3 -c 'print("\n".join("{\"i\": %d}" % i for i in range(0, 3000, 3)))' | canonical >"$WORK/expected.txt"
canonical <"$WORK/sub.out" | cmp -s - "$WORK/expected.txt" || fail "SUB: records differ ($(wc -l <"$WORK/sub.out") lines)"

# A bind on an address in use: exit 2 before anything flows, naming the node and endpoint.
python3 -c '
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(); open(sys.argv[2], "w").write("listening")
time.sleep(60)' "$port" "$WORK/holder" &
holder=$!
wait_for_text "$WORK/holder" listening
pipeline busy 'socket = "PULL"
bind = true' >"$WORK/busy.toml"
run_expect 2 "$STREAMCTL" run "$WORK/busy.toml"
kill $holder
assert_contains "$WORK/err" "source 'in'"
assert_contains "$WORK/err" "tcp://127.0.0.1:$port"

# subscribe on a PULL socket is refused at load.
pipeline wrong 'socket = "PULL"
subscribe = ["x"]' >"$WORK/wrong.toml"
run_expect 2 "$STREAMCTL" run "$WORK/wrong.toml"
assert_contains "$WORK/err" "SUB"
assert_no_processes_left
echo ok
