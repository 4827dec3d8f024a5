# Metrics per operator subtask (issue 10, part 1), through `status --json`:
#   - a bounded job's counters equal its true counts, and stay so after its end (operators.json);
#   - after kill -9 of workers and restarts, the counters are job totals that count each record
#     once (carried from the restored checkpoint), and so is the end-of-run summary;
#   - a slow stage shows as busy, and the stage upstream of it as backpressured;
#   - a failed job's status says which node failed and why.
source "$(dirname "$0")/lib/common.bash"

seed_random metrics METRICS_SEED

# field JSON_FILE NODE KEY: the sum of KEY over NODE's subtasks.
field() {
  python3 - "$@" <<'PY'
import json, sys
status = json.load(open(sys.argv[1]))
node = next((n for n in status["operators"] if n["name"] == sys.argv[2]), None)
if node is None:
    sys.exit(f"no node {sys.argv[2]} in status")
print(sum(s[sys.argv[3]] for s in node["subtasks"]))
PY
}

counted_job() { # NAME [extra TOML]
  cat <<TOML
name = "$1"
parallelism = 2
[checkpoint]
interval = "100ms"
dir = "$WORK/ck-$1"
[restart]
strategy = "fixed"
delay = "50ms"
max_attempts = 100
[sources.g]
type = "generator"
count = 40000
rate = 20000
[operators.quarter]
type = "filter"
inputs = ["g"]
where = "seq % 4 == 0"
[operators.keyed]
type = "map"
inputs = ["quarter"]
set = { k = "seq % 100" }
[operators.per_key]
type = "reduce"
inputs = ["keyed"]
key = ["k"]
aggregates = { n = "count()" }
[sinks.out]
type = "file"
inputs = ["per_key"]
path = "$WORK/out-$1"
TOML
}

# --- a bounded job's counters are its true counts ---
counted_job plain >"$WORK/plain.toml"
run_expect 0 "$STREAMCTL" -v run "$WORK/plain.toml"
written=$(cat "$WORK/out-plain"/part-* | wc -l)
assert_contains "$WORK/err" "40000 records read, $written written"
"$STREAMCTL" status plain --json >"$WORK/plain.json"
assert_eq 40000 "$(field "$WORK/plain.json" g records_out)" "records out of the source"
assert_eq 40000 "$(field "$WORK/plain.json" quarter records_in)" "records into the filter"
assert_eq 10000 "$(field "$WORK/plain.json" quarter records_out)" "records out of the filter"
assert_eq 10000 "$(field "$WORK/plain.json" per_key records_in)" "records into the reduce"
assert_eq "$written" "$(field "$WORK/plain.json" out records_in)" "records into the sink"
assert_eq 25 "$(field "$WORK/plain.json" per_key state_entries)" "keys the reduce holds (seq % 100 of multiples of 4)"
# Each subtask's part of the last checkpoint says how long its task paused and how many bytes
# its snapshot held before compression (the reduce's 25 keys: some).
python3 - "$WORK/plain.json" <<'PY' || fail "last_checkpoint figures of the reduce are wrong"
import json, sys
node = next(n for n in json.load(open(sys.argv[1]))["operators"] if n["name"] == "per_key")
for s in node["subtasks"]:
    c = s["last_checkpoint"]
    assert c["id"] > 0 and c["bytes"] > 0 and c["raw_bytes"] > 0, c
    assert 0 <= c["pause_ms"] <= c["duration_ms"] + 1, c
PY
# g -> quarter -> keyed is one task; its keyed exchange leaves from keyed.
(($(field "$WORK/plain.json" keyed bytes_out) > 0)) || fail "the chain g -> quarter -> keyed shows no bytes sent"
(($(field "$WORK/plain.json" per_key bytes_in) > 0)) || fail "the reduce shows no bytes received"

# --- kill -9 of workers: counters stay job totals, each record counted once ---
kills=0
for try in 1 2 3 4 5; do
  counted_job chaos$try >"$WORK/chaos$try.toml"
  "$STREAMCTL" -v run "$WORK/chaos$try.toml" 2>"$WORK/chaos$try.log" &
  pid=$!
  wait_for_text "$WORK/chaos$try.log" "records flowing"
  while kill -0 $pid 2>/dev/null && ((kills < 2)); do
    sleep "0.$((RANDOM % 9 + 1))"
    kill_worker chaos$try && kills=$((kills + 1))
  done
  set +e; wait $pid; code=$?; set -e
  assert_eq 0 "$code" "exit code after $kills kill(s)"
  ((kills == 0)) && continue
  assert_contains "$WORK/chaos$try.log" "40000 records read, $written written"
  "$STREAMCTL" status chaos$try --json >"$WORK/chaos.json"
  assert_eq 40000 "$(field "$WORK/chaos.json" g records_out)" "records out of the source after $kills kill(s)"
  assert_eq 10000 "$(field "$WORK/chaos.json" quarter records_out)" "records out of the filter after $kills kill(s)"
  assert_eq "$written" "$(field "$WORK/chaos.json" out records_in)" "records into the sink after $kills kill(s)"
  assert_eq "$written" "$(cat "$WORK/out-chaos$try"/part-* | wc -l)" "records in the output after $kills kill(s)"
  echo "[${SECONDS}s] try $try: $kills kill(s), counters equal the true counts"
  break
done
((kills > 0)) || fail "no kill landed in 5 tries (the test could not test)"

# --- a slow stage is busy, and its upstream backpressured ---
echo "[${SECONDS}s] slow stage: starting"
cat >"$WORK/slow.toml" <<TOML
name = "slow"
[sources.g]
type = "generator"
count = 1000000
[operators.slow]
type = "map"
inputs = ["g"]
partition = "rebalance"
parallelism = 1
set = { b = "burn(200)" }
[sinks.out]
type = "file"
inputs = ["slow"]
path = "$WORK/out-slow"
TOML
"$STREAMCTL" run "$WORK/slow.toml" 2>"$WORK/slow.log" &
pid=$!
# Three heartbeats in, the fractions describe a steady state.
ok=""
for _ in $(seq 60); do
  sleep 0.5
  "$STREAMCTL" status slow --json >"$WORK/slow.json" 2>/dev/null || continue
  read -r g_bp slow_busy slow_bp <<<"$(python3 - "$WORK/slow.json" <<'PY'
import json, sys
ops = {n["name"]: n["subtasks"] for n in json.load(open(sys.argv[1]))["operators"]}
g, s = ops["g"][0], ops["slow"][0]
print(g["backpressured"], s["busy"], s["backpressured"])
PY
)"
  if python3 -c "import sys; sys.exit(0 if $g_bp > 0.5 and $slow_busy > 0.5 and $slow_bp < 0.2 else 1)"; then
    ok=1
    break
  fi
done
# Cancel: a drain would run every record through burn().
"$STREAMCTL" cancel slow >/dev/null 2>&1 || true
wait $pid 2>/dev/null || true
[[ -n "$ok" ]] || fail "a slow stage: source backpressured $g_bp (want > 0.5), slow stage busy $slow_busy (want > 0.5) and backpressured $slow_bp (want < 0.2)"
echo "[${SECONDS}s] slow stage: source backpressured $g_bp, slow stage busy $slow_busy, backpressured $slow_bp"

# --- a failed job says where and why ---
cat >"$WORK/bad.toml" <<TOML
name = "bad"
[sources.g]
type = "generator"
profile = "clicks"
count = 100
[operators.minus]
type = "map"
inputs = ["g"]
set = { x = "seq - user" }
on_error = "fail"
[sinks.out]
type = "stdout"
inputs = ["minus"]
TOML
run_expect 1 "$STREAMCTL" run "$WORK/bad.toml"
"$STREAMCTL" status bad --json >"$WORK/bad.json"
python3 - "$WORK/bad.json" <<'PY'
import json, sys
status = json.load(open(sys.argv[1]))
f = status.get("failure")
if not f or f["node"] != "minus" or "expected a number" not in f["message"] or not f["time"]:
    sys.exit(f"FAIL: a failed job's status says {f!r}")
PY
echo "[${SECONDS}s] metrics: ok"
