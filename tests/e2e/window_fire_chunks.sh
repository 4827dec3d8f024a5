# The end of input fires every window at once. The window hands the rows on in chunks of 4096
# (OperatorContext::pass_on_fired) instead of one batch holding them all (a 10 M-key count held
# as many bytes again as its state in that batch): every row must still arrive once, whether
# the sink is fused into the window's chain (p=1) or behind a keyed exchange (p=2), and a
# filter after the window sees every chunk.
source "$(dirname "$0")/lib/common.bash"

keys=30000
cat >"$WORK/p.toml" <<TOML
name = "window-fire-chunks"
[sources.g]
type = "generator"
count = $keys
[operators.per_key]
type = "window"
inputs = ["g"]
key = ["seq"]
window = { kind = "tumbling", size = "3650d" }
aggregates = { n = "count()" }
[operators.odd]
type = "filter"
inputs = ["per_key"]
where = "seq % 2 == 1"
[sinks.out]
type = "file"
inputs = ["odd"]
path = "$WORK/out"
TOML

for p in 1 2; do
  rm -rf "$WORK/out"
  "$STREAMCTL" run "$WORK/p.toml" -p $p
  cat "$WORK"/out/part-* | python3 -c '
import sys, json
seen = {}
for line in sys.stdin:
    r = json.loads(line)
    assert r["n"] == 1, line
    seen[r["seq"]] = seen.get(r["seq"], 0) + 1
keys = int(sys.argv[1])
want = {k: 1 for k in range(keys) if k % 2 == 1}
missing = [k for k in want if k not in seen][:3]
twice = [k for k, c in seen.items() if c != 1 or k not in want][:3]
assert not missing and not twice, f"missing {missing}, extra or repeated {twice}"
' $keys || fail "rows at parallelism $p are not one per odd key"
done
assert_no_processes_left
echo ok
