# on_error: drop (default), dead_letter with the raw input and reason, fail with the line.
source "$(dirname "$0")/lib/common.bash"

printf '{"a":1}\n{"a":\n{"a":3}\nnot json\n{"a":"x"}\n' >"$WORK/in.jsonl"
cat >"$WORK/p.toml" <<TOML
name = "bad"
[sources.in]
type = "file"
path = "$WORK/in.jsonl"
on_error = "dead_letter"
dead_letter = "$WORK/dead.jsonl"
[operators.double]
type = "map"
inputs = ["in"]
set = { b = "a * 2" }
on_error = "dead_letter"
dead_letter = "$WORK/dead-map.jsonl"
[sinks.out]
type = "stdout"
inputs = ["double"]
TOML

run_expect 0 "$STREAMCTL" run "$WORK/p.toml"
assert_eq '{"a":1,"b":2}
{"a":3,"b":6}' "$(cat "$WORK/out")" "good records"
python3 - "$WORK/dead.jsonl" <<'PY' || fail "dead-letter file of the source is wrong: $(cat "$WORK/dead.jsonl")"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["line"] for r in rows] == [2, 4], rows
assert rows[0]["input"] == '{"a":' and rows[1]["input"] == "not json", rows
assert all(r["node"] == "in" and r["error"] for r in rows), rows
PY
python3 - "$WORK/dead-map.jsonl" <<'PY' || fail "dead-letter file of the map is wrong: $(cat "$WORK/dead-map.jsonl")"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 1 and rows[0]["node"] == "double", rows
assert json.loads(rows[0]["input"]) == {"a": "x"}, rows
assert "string" in rows[0]["error"], rows
PY

# drop: the good records pass, a warning is logged, exit 0.
sed -i '/^on_error/d; /^dead_letter/d' "$WORK/p.toml"
run_expect 0 "$STREAMCTL" run "$WORK/p.toml"
assert_eq 2 "$(wc -l <"$WORK/out")" "records kept with drop"
assert_contains "$WORK/err" "dropped"

# fail: exit 1, naming the node, the line and the reason.
sed -i 's/^\[sources.in\]/[sources.in]\non_error = "fail"/' "$WORK/p.toml"
run_expect 1 "$STREAMCTL" run "$WORK/p.toml"
assert_contains "$WORK/err" "node 'in'"
assert_contains "$WORK/err" "line 2"
assert_no_processes_left
echo ok
