# The command line: --help everywhere, --version, usage errors exit 2, graph formats.
source "$(dirname "$0")/lib/common.bash"

run_expect 0 "$STREAMCTL" --help
cp "$WORK/out" "$WORK/help"
if grep -qE "^ +worker " "$WORK/help"; then fail "the hidden worker command shows in --help"; fi
for cmd in validate graph run test; do
  assert_contains "$WORK/help" "$cmd"
  run_expect 0 "$STREAMCTL" $cmd --help
  assert_contains "$WORK/out" "FILE"
done

run_expect 0 "$STREAMCTL" --version
[[ "$(cat "$WORK/out")" =~ ^streamctl\ [0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "bad --version: $(cat "$WORK/out")"

run_expect 2 "$STREAMCTL" frobnicate
run_expect 2 "$STREAMCTL"
run_expect 2 "$STREAMCTL" run
run_expect 2 "$STREAMCTL" graph "$SOURCE_DIR/examples/word_split.toml" --format png

# Global flags before or after the command.
run_expect 0 "$STREAMCTL" -q validate "$SOURCE_DIR/examples/word_split.toml"
run_expect 0 "$STREAMCTL" validate "$SOURCE_DIR/examples/word_split.toml" -q --log-format json
assert_eq "" "$(cat "$WORK/err")" "stderr with -q"

# graph: text, dot and json describe the same plan.
example="$SOURCE_DIR/examples/generated_clicks.toml"
run_expect 0 "$STREAMCTL" graph "$example"
assert_contains "$WORK/out" "chain 0: clicks -> errors -> out"
run_expect 0 "$STREAMCTL" graph "$example" --format dot
assert_contains "$WORK/out" "digraph"
run_expect 0 "$STREAMCTL" graph "$example" --format json -p 3
python3 - "$WORK/out" <<'PY' || fail "graph json is wrong: $(cat "$WORK/out")"
import json, sys
g = json.load(open(sys.argv[1]))
assert [n["name"] for n in g["nodes"]] == ["clicks", "errors", "out"], g
assert all(n["parallelism"] == 3 for n in g["nodes"]), g
assert len(g["chains"]) == 1 and g["chains"][0]["nodes"] == ["clicks", "errors", "out"], g
assert len(g["tasks"]) == 3 and all(t["host"] == "localhost" for t in g["tasks"]), g
assert all(e["fused"] and e["partition"] == "forward" for e in g["edges"]), g
PY
run_expect 0 "$STREAMCTL" graph "$SOURCE_DIR/examples/clicks_filter.toml" --format json -p 2
python3 - "$WORK/out" <<'PY' || fail "graph json of a mixed plan is wrong: $(cat "$WORK/out")"
import json, sys
g = json.load(open(sys.argv[1]))
par = {n["name"]: n["parallelism"] for n in g["nodes"]}
assert par == {"clicks": 1, "ok": 2, "slim": 2, "out": 1}, par
edges = {(e["from"], e["to"]): e for e in g["edges"]}
assert edges[("clicks", "ok")]["partition"] == "rebalance" and edges[("clicks", "ok")]["channels"] == 2
assert edges[("ok", "slim")]["fused"]
assert edges[("slim", "out")]["partition"] == "rebalance"
assert len(g["tasks"]) == 4
PY

# --set overrides any value.
printf '{"v":1}\n{"v":2}\n' >"$WORK/in.jsonl"
cat >"$WORK/p.toml" <<'TOML'
name = "set"
[sources.in]
type = "file"
path = "nowhere.jsonl"
[operators.f]
type = "filter"
inputs = ["in"]
where = "v > 100"
[sinks.out]
type = "stdout"
inputs = ["f"]
TOML
run_expect 0 "$STREAMCTL" run "$WORK/p.toml" --set "sources.in.path=$WORK/in.jsonl" --set 'operators.f.where=v > 1'
assert_eq '{"v":2}' "$(cat "$WORK/out")" "output with --set"
echo ok
