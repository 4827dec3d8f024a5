# The tcp source (issue 11): several clients at once, each line one record, lines of
# different connections never mixed, the unterminated last line of a connection a record;
# a line over max_line (5 MB) and a line of binary garbage are bad records while the others
# pass; an address in use is exit 2 naming the node, its file:line:col and the address.
source "$(dirname "$0")/lib/common.bash"

port=$(python3 "$SOURCE_DIR/tests/e2e/lib/free_port.py")
pipeline() { # NAME [EXTRA KEYS]
  cat <<TOML
name = "$1"
[sources.in]
type = "tcp"
address = "127.0.0.1:$port"
end_after_idle = "1500ms"
on_error = "dead_letter"
dead_letter = "$WORK/$1.dead"
${2:-}
[sinks.out]
type = "stdout"
inputs = ["in"]
TOML
}

# Four concurrent clients, 20,000 lines each; the last line of each has no newline.
for c in 1 2 3 4; do
  python3 - "$c" >"$WORK/client$c.jsonl" <<'PY'
import sys
c = int(sys.argv[1])
sys.stdout.write("\n".join('{"c":%d,"i":%d,"pad":"%s"}' % (c, i, "x" * (i % 50)) for i in range(20000)))
PY
done
pipeline concurrent >"$WORK/concurrent.toml"
"$STREAMCTL" run "$WORK/concurrent.toml" >"$WORK/concurrent.out" 2>"$WORK/concurrent.log" &
job=$!
for c in 1 2 3 4; do python3 "$SOURCE_DIR/tests/e2e/lib/tcp_client.py" "$port" "$WORK/client$c.jsonl" "$c" & done
wait %2 %3 %4 %5 || fail "a client failed"
set +e; wait $job; code=$?; set -e
assert_eq 0 "$code" "exit code ($(tail -3 "$WORK/concurrent.log"))"
(for c in 1 2 3 4; do cat "$WORK/client$c.jsonl"; echo; done) | canonical >"$WORK/expected.txt"
canonical <"$WORK/concurrent.out" >"$WORK/got.txt"
assert_eq 80000 "$(wc -l <"$WORK/got.txt")" "records from four clients"
cmp -s "$WORK/expected.txt" "$WORK/got.txt" || fail "the records differ from what the clients sent"
[[ ! -s "$WORK/concurrent.dead" ]] || fail "bad records where there were none: $(head -c 300 "$WORK/concurrent.dead")"

# A 5 MB line and binary garbage between good lines: two bad records, the others pass.
python3 - >"$WORK/mixed.bin" <<'PY'
import os, sys
out = sys.stdout.buffer
out.write(b'{"i":1}\n')
out.write(b'{"big":"' + b"y" * (5 << 20) + b'"}\n')
out.write(b'{"i":2}\n')
out.write(os.urandom(300).replace(b"\n", b"?") + b"\n")
out.write(b'{"i":3}\n')
PY
pipeline mixed >"$WORK/mixed.toml"
"$STREAMCTL" run "$WORK/mixed.toml" >"$WORK/mixed.out" 2>"$WORK/mixed.log" &
job=$!
python3 "$SOURCE_DIR/tests/e2e/lib/tcp_client.py" "$port" "$WORK/mixed.bin"
set +e; wait $job; code=$?; set -e
assert_eq 0 "$code" "exit code with bad lines ($(tail -3 "$WORK/mixed.log"))"
assert_eq '{"i": 1} {"i": 2} {"i": 3}' "$(canonical <"$WORK/mixed.out" | tr '\n' ' ' | sed 's/ $//')" "good records"
assert_eq 2 "$(wc -l <"$WORK/mixed.dead")" "bad records (5 MB line, garbage)"
assert_contains "$WORK/mixed.dead" "longer than max_line"
[[ $(wc -c <"$WORK/mixed.dead") -lt 100000 ]] || fail "the dead letter holds the whole 5 MB line"

# An address in use: exit 2 before anything flows, naming the node, where and the address.
python3 -c '
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(); open(sys.argv[2], "w").write("listening")
time.sleep(60)' "$port" "$WORK/holder" &
holder=$!
wait_for_text "$WORK/holder" listening
pipeline busy >"$WORK/busy.toml"
run_expect 2 "$STREAMCTL" run "$WORK/busy.toml"
kill $holder
assert_contains "$WORK/err" "busy.toml:4:"
assert_contains "$WORK/err" "source 'in'"
assert_contains "$WORK/err" "127.0.0.1:$port"
[[ ! -s "$WORK/out" ]] || fail "records flowed from a source that could not listen"

# Port 0 is refused at load: a listener needs a known port.
sed "s/:$port\"/:0\"/" "$WORK/busy.toml" >"$WORK/zero.toml"
run_expect 2 "$STREAMCTL" run "$WORK/zero.toml"
assert_contains "$WORK/err" "1 to 65535"
assert_no_processes_left
echo ok
