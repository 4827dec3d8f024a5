# The output multiset does not depend on parallelism (1, 2, 4), on fusion, or on the data
# channels being ipc:// or tcp://.
source "$(dirname "$0")/lib/common.bash"

make_clicks 20000 >"$WORK/clicks.jsonl"
cat >"$WORK/p.toml" <<TOML
name = "par"
batch_size = 100
[sources.in]
type = "file"
path = "$WORK/clicks.jsonl"
[operators.ok]
type = "filter"
inputs = ["in"]
where = "status == 200"
[operators.words]
type = "flat_map"
inputs = ["ok"]
split = { field = "page", by = "/", as = "part" }
[operators.m]
type = "map"
inputs = ["words"]
set = { k = "concat(user, ':', part)" }
remove = ["ts"]
[sinks.out]
type = "stdout"
inputs = ["m"]
TOML

"$STREAMCTL" run "$WORK/p.toml" -p 1 | canonical >"$WORK/p1"
[[ $(wc -l <"$WORK/p1") -gt 10000 ]] || fail "too little output at parallelism 1"
for p in 2 4; do
  for transport in ipc tcp; do
    "$STREAMCTL" run "$WORK/p.toml" -p $p --transport $transport | canonical >"$WORK/p$p-$transport"
    cmp -s "$WORK/p1" "$WORK/p$p-$transport" || fail "parallelism $p over $transport differs from parallelism 1"
  done
done

# Rebalance between different parallelisms, and a node fed by two inputs (a union).
cat >"$WORK/union.toml" <<TOML
name = "union"
[sources.a]
type = "file"
path = "$WORK/clicks.jsonl"
parallelism = 1
[sources.b]
type = "generator"
count = 5000
[operators.both]
type = "map"
inputs = ["a", "b"]
set = { seen = "true" }
parallelism = 3
[sinks.out]
type = "stdout"
inputs = ["both"]
TOML
"$STREAMCTL" run "$WORK/union.toml" --transport tcp | canonical >"$WORK/union"
assert_eq 25000 "$(wc -l <"$WORK/union" | tr -d ' ')" "records through the union"
"$STREAMCTL" graph "$WORK/union.toml" >"$WORK/graph"
assert_contains "$WORK/graph" "rebalance"
assert_no_processes_left
echo ok
