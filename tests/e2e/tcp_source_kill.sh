# The tcp source is exactly-once through its spool (issue 11): a worker killed with -9 after
# the source has taken a client's lines off the socket (all spooled) but, at a random moment,
# before or after they were all emitted and committed; after the restart a second client
# sends more. Every line of both clients must be in the committed output exactly once.
source "$(dirname "$0")/lib/common.bash"

seed=${TCP_KILL_SEED:-$RANDOM}
echo "seed $seed (TCP_KILL_SEED=$seed replays the moment of the kill)"
RANDOM=$seed

port=$(python3 "$SOURCE_DIR/tests/e2e/lib/free_port.py")
cat >"$WORK/job.toml" <<TOML
name = "tcpkill"
[checkpoint]
interval = "200ms"
dir = "$WORK/ck"
[restart]
strategy = "fixed"
delay = "50ms"
max_attempts = 5
[sources.in]
type = "tcp"
address = "127.0.0.1:$port"
end_after_idle = "2s"
[operators.tag]
type = "map"
inputs = ["in"]
set = { twice = "i * 2" }
[sinks.out]
type = "stdout"
inputs = ["tag"]
TOML
for c in 1 2; do
  python3 - "$c" >"$WORK/client$c.jsonl" <<'PY'
import sys
c = int(sys.argv[1])
print("\n".join('{"c":%d,"i":%d}' % (c, i) for i in range(150000)))
PY
done

"$STREAMCTL" -vv run "$WORK/job.toml" >"$WORK/job.out" 2>"$WORK/job.log" &
job=$!
python3 "$SOURCE_DIR/tests/e2e/lib/tcp_client.py" "$port" "$WORK/client1.jsonl"
# The client returns once the source closed the connection: every byte is in the spool.
spooled=$(cat "$WORK/ck/tcpkill/spool/"tcp-in.*.spool | wc -c)
assert_eq "$(wc -c <"$WORK/client1.jsonl")" "$spooled" "bytes spooled of client 1"
delay=$((RANDOM % 400))
echo "killing the workers ${delay} ms after client 1 finished"
sleep "0.$(printf %03d $delay)"
before=$(grep -c "records flowing" "$WORK/job.log" || true)
mapfile -t workers < <(pgrep -f -- "worker --job-dir $STREAMCTL_STATE_DIR")
((${#workers[@]} > 0)) || fail "no worker to kill"
kill -9 "${workers[@]}"
deadline=$((SECONDS + 30))
until (($(grep -c "records flowing" "$WORK/job.log" || true) > before)); do
  ((SECONDS < deadline)) || { cat "$WORK/job.log" >&2; fail "the job did not restart after the kill"; }
  sleep 0.05
done
python3 "$SOURCE_DIR/tests/e2e/lib/tcp_client.py" "$port" "$WORK/client2.jsonl"
set +e; wait $job; code=$?; set -e
assert_eq 0 "$code" "exit code ($(tail -3 "$WORK/job.log"))"
assert_eq 1 "$(grep -c "restarting the job" "$WORK/job.log" || true)" "restarts"
cat "$WORK/client1.jsonl" "$WORK/client2.jsonl" | python3 -c '
import sys, json
for l in sys.stdin:
    r = json.loads(l); r["twice"] = r["i"] * 2; print(json.dumps(r, sort_keys=True))' | sort >"$WORK/expected.txt"
canonical <"$WORK/job.out" >"$WORK/got.txt"
if ! cmp -s "$WORK/expected.txt" "$WORK/got.txt"; then
  echo "expected $(wc -l <"$WORK/expected.txt") records, got $(wc -l <"$WORK/got.txt"), $(sort -u "$WORK/got.txt" | wc -l) distinct" >&2
  diff "$WORK/expected.txt" "$WORK/got.txt" | head -5 >&2
  fail "records lost or repeated across the kill (seed $seed)"
fi
[[ -z "$(ls -A "$WORK/ck/tcpkill/spool" 2>/dev/null)" ]] || fail "a finished job left spool files"
assert_no_processes_left
echo ok
