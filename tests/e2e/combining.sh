# Two-phase aggregation (operators/window_combiner.hpp): senders of a key edge into an
# event-time tumbling or sliding window combine records into partial aggregates. It never
# changes a job's output: windows of every combinable function, tumbling and sliding, give at
# parallelism 2 and 4 with combining what they give at parallelism 1 without it; bad records
# are reported with their own text as before; `graph` shows which edges combine. (Exactly-once
# under kill -9 with combining: checkpoint_kill.sh, whose windows are combined.)
source "$(dirname "$0")/lib/common.bash"

cat >"$WORK/windows.toml" <<TOML
name = "combining"
[sources.g]
type = "generator"
profile = "clicks"
users = 300
count = 80000
seed = 4
event_time = "ts / 20"
[operators.tumbling]
type = "window"
inputs = ["g"]
key = ["user"]
window = { kind = "tumbling", size = "1s" }
aggregates = { n = "count()", kb = "sum(bytes)", lo = "min(bytes)", hi = "max(path)", mean = "avg(bytes)", pages = "count_distinct(path)", about = "approx_count_distinct(path)", top = "top_k(path, 2)" }
[operators.sliding]
type = "window"
inputs = ["g"]
key = ["path"]
window = { kind = "sliding", size = "3s", slide = "1s" }
aggregates = { n = "count()", users = "count_distinct(user)" }
[sinks.out]
type = "file"
inputs = ["tumbling", "sliding"]
path = "unused"
TOML

# run_sorted P COMBINE [PIPELINE]: the output of PIPELINE (windows by default) sorted, in a
# file whose name it prints.
run_sorted() {
  local pipeline=${3:-windows}
  local out="$WORK/run-$pipeline-$1-$2"
  "$STREAMCTL" run "$WORK/$pipeline.toml" -p "$1" --set combine="$2" --set sinks.out.path="$out.d" 2>"$WORK/err" ||
    { cat "$WORK/err" >&2; fail "$pipeline at parallelism $1, combine=$2 failed"; }
  cat "$out.d"/part-* | sort >"$out"
  echo "$out"
}

reference=$(run_sorted 1 false)
[[ $(wc -l <"$reference") -gt 1000 ]] || fail "the reference run wrote too little"
for p in 2 4; do
  actual=$(run_sorted $p true)
  cmp -s "$reference" "$actual" || fail "parallelism $p with combining differs from parallelism 1 without: $(diff "$reference" "$actual" | head -5)"
  # The windows read partial aggregates, not the fields of the records: no warning that the
  # key or an aggregate's field is missing from what they read.
  ! grep -F "which none of the" "$WORK/err" || fail "a warning of a missing field where partials came"
done

# A sparse count (about one record per key and pane) makes the combiner step aside for most of
# the run (WindowCombiner::bypassing): records then go as they are while partials of earlier
# panes still wait for their watermark. The output is still the same.
cat >"$WORK/sparse.toml" <<TOML
name = "combining-sparse"
[sources.g]
type = "generator"
profile = "clicks"
users = 200000
count = 700000
seed = 5
event_time = "ts / 100"
[operators.per_user]
type = "window"
inputs = ["g"]
key = ["user"]
window = { kind = "tumbling", size = "1s" }
aggregates = { n = "count()", kb = "sum(bytes)" }
[sinks.out]
type = "file"
inputs = ["per_user"]
path = "unused"
TOML
sparse_reference=$(run_sorted 1 false sparse)
sparse_combined=$(run_sorted 2 true sparse)
[[ $(wc -l <"$sparse_reference") -gt 100000 ]] || fail "the sparse count wrote too little"
cmp -s "$sparse_reference" "$sparse_combined" || fail "the sparse count differs with combining: $(diff "$sparse_reference" "$sparse_combined" | head -5)"

# graph says which edges combine, and combine = false turns it off.
run_expect 0 "$STREAMCTL" graph "$WORK/windows.toml" -p 2
assert_contains "$WORK/out" "g -> tumbling: key, combined before sending, 4 channel(s)"
run_expect 0 "$STREAMCTL" graph "$WORK/windows.toml" -p 2 --format json
[[ $(jq '[.edges[] | select(.combined)] | length' "$WORK/out") == 2 ]] || fail "graph --format json: $(cat "$WORK/out")"
run_expect 0 "$STREAMCTL" graph "$WORK/windows.toml" -p 2 --format json --set combine=false
[[ $(jq '[.edges[] | select(.combined)] | length' "$WORK/out") == 0 ]] || fail "combine = false still combines"

# Bad records pass through the sender and are the window's, with their raw line and reason, as
# without combining; late records likewise go to the late output.
cat >"$WORK/input.jsonl" <<'JSONL'
{"k":"a","v":1,"t":1000}
{"k":"a","v":2,"t":1100}
{"k":"b","v":"two","t":1200}
{"k":"b","v":3,"t":1300}
{"k":"a","v":4,"t":2500}
{"k":"c","v":5,"t":900}
{"k":"b","v":6,"t":4000}
JSONL
cat >"$WORK/bad.toml" <<TOML
name = "combining-bad"
[sources.in]
type = "file"
path = "$WORK/input.jsonl"
event_time = "t"
parallelism = 1
[operators.w]
type = "window"
inputs = ["in"]
parallelism = 2
key = ["k"]
window = { kind = "tumbling", size = "1s" }
aggregates = { n = "count()", s = "sum(v)" }
on_error = "dead_letter"
dead_letter = "$WORK/dead.jsonl"
[sinks.out]
type = "file"
inputs = ["w"]
path = "unused"
TOML
for setting in false true; do
  rm -f "$WORK/dead.jsonl"
  run_expect 0 "$STREAMCTL" run "$WORK/bad.toml" --set combine=$setting --set sinks.out.path="$WORK/bad-$setting"
  cat "$WORK/bad-$setting"/part-* | sort >"$WORK/rows-$setting"
  [[ -s $WORK/dead.jsonl ]] || fail "combine=$setting: no dead letter"
  cp "$WORK/dead.jsonl" "$WORK/dead-$setting"
done
cmp -s "$WORK/rows-false" "$WORK/rows-true" || fail "rows differ with combining: $(diff "$WORK/rows-false" "$WORK/rows-true")"
cmp -s "$WORK/dead-false" "$WORK/dead-true" || fail "dead letters differ with combining: $(diff "$WORK/dead-false" "$WORK/dead-true")"
assert_contains "$WORK/dead-true" 'sum(v): expected a number, got string'
