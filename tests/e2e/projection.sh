# Projection pushdown (projection = true, the default) never changes a job's output: every
# example gives the same [[test]] results with it on and off, and jobs that run on the
# generator and on files give the same output multisets at parallelism 1, 2 and 4 with it on
# as at parallelism 1 with it off. `graph` shows what each edge carries.
source "$(dirname "$0")/lib/common.bash"

for example in "$SOURCE_DIR"/examples/*.toml; do
  for setting in true false; do
    run_expect 0 "$STREAMCTL" test "$example" -p 2 --set projection=$setting
    grep -qE '^[0-9]+ passed, 0 failed$' "$WORK/out" || fail "$example, projection=$setting: $(cat "$WORK/out")"
  done
done

# run_sorted FILE P SETTING: the job's output, sorted.
run_sorted() {
  local out="$WORK/run-$(basename "$1" .toml)-$2-$3"
  rm -rf "$out.d"
  "$STREAMCTL" run "$1" -p "$2" --set projection="$3" --set sinks.out.path="$out.d" 2>"$WORK/err" ||
    { cat "$WORK/err" >&2; fail "$1 at parallelism $2, projection=$3 failed"; }
  cat "$out.d"/part-* | sort >"$out"
  echo "$out"
}

cat >"$WORK/keyed.toml" <<'TOML'
name = "projection-keyed"
[sources.g]
type = "generator"
profile = "clicks"
users = 500
count = 60000
seed = 9
event_time = "ts / 10"
[operators.big]
type = "filter"
inputs = ["g"]
where = "bytes > 2000"
[operators.named]
type = "map"
inputs = ["big"]
set = { kb = "bytes / 1024" }
rename = { page = "path" }
[operators.per_user]
type = "window"
inputs = ["named"]
key = ["user"]
window = { kind = "tumbling", size = "1s" }
aggregates = { n = "count()", kb = "sum(kb)", pages = "count_distinct(path)" }
[sinks.out]
type = "file"
inputs = ["per_user"]
path = "unused"
TOML

cat >"$WORK/files.toml" <<TOML
name = "projection-files"
[sources.clicks]
type = "file"
path = "$SOURCE_DIR/examples/data/clicks.jsonl"
[operators.per_page]
type = "reduce"
inputs = ["clicks"]
key = ["page"]
aggregates = { n = "count()", users = "count_distinct(user)" }
[sinks.out]
type = "file"
inputs = ["per_page"]
path = "unused"
TOML

for job in "$WORK/keyed.toml" "$WORK/files.toml"; do
  reference=$(run_sorted "$job" 1 false)
  [[ -s $reference ]] || fail "$job printed nothing"
  for p in 1 2 4; do
    actual=$(run_sorted "$job" $p true)
    cmp -s "$reference" "$actual" || fail "$job at parallelism $p with projection differs from without: $(diff "$reference" "$actual" | head -5)"
  done
done

# Every field but some: a map that removes fields before a sink of whole records lets its
# source skip them, and a field it overwrites keeps its place, so the output is the same text
# with projection on and off (a `set` field left out at the source came back at the end).
printf '{"a":%d,"x":"old","ts":%d,"b":true}\n' $(for i in $(seq 500); do echo "$i $((i * 7))"; done) >"$WORK/wide.jsonl"
cat >"$WORK/but.toml" <<TOML
name = "projection-but"
[sources.in]
type = "file"
path = "$WORK/wide.jsonl"
[operators.m]
type = "map"
inputs = ["in"]
set = { x = "a * 2" }
remove = ["ts"]
[sinks.out]
type = "file"
inputs = ["m"]
path = "unused"
TOML
for p in 1 2; do
  on=$(run_sorted "$WORK/but.toml" $p true)
  off=$(run_sorted "$WORK/but.toml" $p false)
  cmp -s "$off" "$on" || fail "every field but ts, parallelism $p: output differs with projection: $(diff "$off" "$on" | head -4)"
done
grep -q '^{"a":1,"x":2,"b":true}$' "$on" || fail "every field but ts: $(head -2 "$on")"
run_expect 0 "$STREAMCTL" graph "$WORK/but.toml"
assert_contains "$WORK/out" "in -> m: forward, fused (in memory); all fields but ts"

# graph: the keyed edge carries only what the window reads; the source makes only what is read.
run_expect 0 "$STREAMCTL" graph "$WORK/keyed.toml" -p 2
assert_contains "$WORK/out" "named -> per_user: key, combined before sending, 4 channel(s); fields kb, path, user"
run_expect 0 "$STREAMCTL" graph "$WORK/keyed.toml" -p 2 --format json
python3 - "$WORK/out" <<'PY' || fail "graph json lacks the projected fields: $(cat "$WORK/out")"
import json, sys
graph = json.load(open(sys.argv[1]))
edges = {(e["from"], e["to"]): e for e in graph["edges"]}
assert edges[("named", "per_user")]["fields"] == ["kb", "path", "user"], edges
assert edges[("per_user", "out")]["fields"] is None, edges
source = [n for n in graph["nodes"] if n["name"] == "g"][0]
assert source["fields"] == ["bytes", "page", "path", "ts", "user"], source
PY
run_expect 0 "$STREAMCTL" graph "$WORK/keyed.toml" -p 2 --format json --set projection=false
python3 -c 'import json,sys; g=json.load(open(sys.argv[1])); assert all(e["fields"] is None for e in g["edges"])' "$WORK/out" ||
  fail "projection=false still projects: $(cat "$WORK/out")"
assert_no_processes_left
echo ok
