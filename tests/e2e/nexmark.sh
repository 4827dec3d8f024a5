# Every Nexmark example (examples/nexmark_q*.toml) over the generator gives the same, non-empty
# multiset of output records at parallelism 1, 2 and 4 (SPEC §7: for bounded input the output
# does not depend on parallelism), and projection pushdown does not change it: the run at
# parallelism 1 has projection = false. Their hand-checked [[test]] cases run in examples.sh.
source "$(dirname "$0")/lib/common.bash"

events=${NEXMARK_EVENTS:-20000}
count=0
for example in "$SOURCE_DIR"/examples/nexmark_q*.toml; do
  query=$(basename "$example" .toml)
  for p in 1 2 4; do
    projection=$([[ $p == 1 ]] && echo false || echo true)
    run_expect 0 "$STREAMCTL" run "$example" -p $p --set "sources.events.count=$events" \
      --set projection=$projection
    canonical <"$WORK/out" >"$WORK/$query.p$p"
  done
  [[ -s "$WORK/$query.p1" ]] || fail "$query printed nothing over $events events"
  for p in 2 4; do
    cmp -s "$WORK/$query.p1" "$WORK/$query.p$p" || fail "$query: the output at parallelism $p \
(projection on) differs from that at 1 (projection off): $(diff "$WORK/$query.p1" "$WORK/$query.p$p" | head -5)"
  done
  count=$((count + 1))
done
[[ $count -ge 10 ]] || fail "expected the Nexmark examples, found $count"
assert_no_processes_left
echo ok
