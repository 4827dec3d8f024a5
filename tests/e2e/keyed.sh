# Keyed edges: records go to the subtask that owns their key group, so running counts per key
# are the same whatever the parallelism, and equal to a plain count.
source "$(dirname "$0")/lib/common.bash"

make_clicks 20000 >"$WORK/clicks.jsonl"
cat >"$WORK/p.toml" <<TOML
name = "keyed"
[sources.in]
type = "file"
path = "$WORK/clicks.jsonl"
[operators.per_user]
type = "reduce"
inputs = ["in"]
key = ["user"]
aggregates = { views = "count()", bytes = "sum(bytes)" }
[sinks.out]
type = "stdout"
inputs = ["per_user"]
TOML

"$STREAMCTL" graph "$WORK/p.toml" -p 3 >"$WORK/graph"
assert_contains "$WORK/graph" "in -> per_user: key, 9 channel(s)"

# The final row of each key: its largest count.
final_counts() {
  python3 -c 'import sys, json
best = {}
for line in sys.stdin:
    r = json.loads(line)
    if r["views"] > best.get(r["user"], (0, 0))[0]:
        best[r["user"]] = (r["views"], r["bytes"])
for u in sorted(best): print(u, *best[u])'
}
python3 - "$WORK/clicks.jsonl" <<'PY' >"$WORK/expected"
import sys, json
counts = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    v, b = counts.get(r["user"], (0, 0))
    counts[r["user"]] = (v + 1, b + r["bytes"])
for u in sorted(counts): print(u, *counts[u])
PY
for p in 1 2 4; do
  "$STREAMCTL" run "$WORK/p.toml" -p $p >"$WORK/out-$p"
  assert_eq 20000 "$(wc -l <"$WORK/out-$p" | tr -d ' ')" "one row per input at parallelism $p"
  final_counts <"$WORK/out-$p" >"$WORK/final-$p"
  cmp -s "$WORK/expected" "$WORK/final-$p" || fail "counts at parallelism $p differ: $(diff "$WORK/expected" "$WORK/final-$p" | head -3)"
  # The multiset of running counts does not depend on the parallelism either.
  python3 -c 'import sys, json
for l in sys.stdin: r = json.loads(l); print(r["user"], r["views"])' <"$WORK/out-$p" | sort >"$WORK/running-$p"
done
cmp -s "$WORK/running-1" "$WORK/running-2" && cmp -s "$WORK/running-1" "$WORK/running-4" || fail "running counts differ"
assert_no_processes_left
echo ok
