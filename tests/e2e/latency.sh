# Latency markers (issue 10, part 2): with [metrics] latency_interval, sources send markers that
# follow the records; each node downstream keeps the source-to-here latency of the last ones.
#   - markers are never counted as records, and the output is the same with and without them;
#   - the percentiles of a stage that is slowed (burn()) rise far above those of a fast one;
#   - without latency_interval, no latency figures at all.
source "$(dirname "$0")/lib/common.bash"

job() { # NAME BURN_MICROS [LATENCY_INTERVAL]
  cat <<TOML
name = "$1"
$([[ -n "${3:-}" ]] && printf '[metrics]\nlatency_interval = "%s"\n' "$3")
[sources.g]
type = "generator"
rate = 2000
count = 6000
[operators.stage]
type = "map"
inputs = ["g"]
partition = "rebalance"
set = { b = "burn($2)" }
[sinks.out]
type = "file"
inputs = ["stage"]
path = "$WORK/out-$1"
TOML
}

# latency JSON NODE: "markers p50 p99" of NODE's first subtask ("- - -" without figures).
latency() {
  python3 - "$@" <<'PY'
import json, sys
node = next(n for n in json.load(open(sys.argv[1]))["operators"] if n["name"] == sys.argv[2])
l = node["subtasks"][0].get("latency_ms")
print("- - -" if l is None else f'{l["markers"]} {l["p50"]} {l["p99"]}')
PY
}

job plain 0 >"$WORK/plain.toml"
run_expect 0 "$STREAMCTL" run "$WORK/plain.toml"
"$STREAMCTL" status plain --json >"$WORK/plain.json"
assert_eq "- - -" "$(latency "$WORK/plain.json" out)" "latency figures without latency_interval"

job fast 0 100ms >"$WORK/fast.toml"
run_expect 0 "$STREAMCTL" run "$WORK/fast.toml"
"$STREAMCTL" status fast --json >"$WORK/fast.json"
read -r fast_markers fast_p50 fast_p99 <<<"$(latency "$WORK/fast.json" out)"
((fast_markers >= 10)) || fail "the fast job's sink saw $fast_markers markers in 3 s at 100 ms"
# Markers are not records: the sink counted and wrote exactly the 6000.
python3 - "$WORK/fast.json" <<'PY'
import json, sys
ops = {n["name"]: n["subtasks"][0] for n in json.load(open(sys.argv[1]))["operators"]}
assert ops["out"]["records_in"] == 6000, ops["out"]["records_in"]
assert ops["stage"]["records_in"] == 6000, ops["stage"]["records_in"]
PY
assert_eq 6000 "$(cat "$WORK/out-fast"/part-* | wc -l)" "records written with markers on"
cmp -s <(cat "$WORK/out-plain"/part-* | sort) <(cat "$WORK/out-fast"/part-* | sort) ||
  fail "the output with latency markers differs from the output without"

# 2000 records/s into a stage that takes 1 ms each: the stage falls behind, records wait in
# its queue, and so do the markers behind them.
job slow 1000 100ms >"$WORK/slow.toml"
run_expect 0 "$STREAMCTL" run "$WORK/slow.toml"
"$STREAMCTL" status slow --json >"$WORK/slow.json"
read -r slow_markers slow_p50 slow_p99 <<<"$(latency "$WORK/slow.json" out)"
echo "sink latency: fast p50 ${fast_p50} ms p99 ${fast_p99} ms ($fast_markers markers); slowed p50 ${slow_p50} ms p99 ${slow_p99} ms ($slow_markers markers)"
python3 -c "import sys; sys.exit(0 if $slow_p50 > 200 and $slow_p50 > 5 * $fast_p50 else 1)" ||
  fail "a slowed stage's p50 ($slow_p50 ms) is not far above a fast one's ($fast_p50 ms)"
echo "latency: ok"
