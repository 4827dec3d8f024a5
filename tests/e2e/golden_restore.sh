# Savepoints of the first snapshot format restore forever (STYLE.md, Tests): the savepoint in
# tests/data/savepoints/golden-v1 was written by `run --savepoint-on-exit` of
# tests/data/savepoints/golden.toml over the first 250 lines of events.jsonl (windows open,
# dedup state, file offset). Restored over all 400 lines, the job must write exactly
# golden-v1-restored.jsonl. If this fails after a change of the format, keep a reader of
# version 1 beside the new one; do not regenerate the golden files.
source "$(dirname "$0")/lib/common.bash"

data="$SOURCE_DIR/tests/data/savepoints"
cp "$data/golden.toml" "$data/events.jsonl" "$WORK/"
run_expect 0 "$STREAMCTL" snapshot verify "$data/golden-v1"
run_expect 0 "$STREAMCTL" snapshot inspect --json "$data/golden-v1"
assert_contains "$WORK/out" '"kind":"savepoint"'
canonical <"$data/golden-v1-restored.jsonl" >"$WORK/expected.txt"
# Written at parallelism 1; restored at 1 and, with its key groups dealt out, at 3.
for p in 1 3; do
  run_expect 0 "$STREAMCTL" run "$WORK/golden.toml" --from-savepoint "$data/golden-v1" -p $p
  canonical <"$WORK/out" >"$WORK/got.txt"
  if ! cmp -s "$WORK/expected.txt" "$WORK/got.txt"; then
    diff "$WORK/expected.txt" "$WORK/got.txt" | head -10 >&2
    fail "restoring the golden savepoint at parallelism $p wrote other records"
  fi
done
# The savepoint is only read: restoring it changes nothing in it.
git -C "$SOURCE_DIR" diff --quiet -- tests/data/savepoints 2>/dev/null || [[ ! -d $SOURCE_DIR/.git ]] ||
  fail "restoring changed the golden savepoint"
echo ok
