# Every example in examples/ validates and passes its own [[test]] cases, at parallelism 1
# and 3.
source "$(dirname "$0")/lib/common.bash"

count=0
for example in "$SOURCE_DIR"/examples/*.toml "$SOURCE_DIR"/examples/udf/*.toml; do
  run_expect 0 "$STREAMCTL" validate "$example"
  for p in 1 3; do
    run_expect 0 "$STREAMCTL" test "$example" -p $p
    grep -qE '^[0-9]+ passed, 0 failed$' "$WORK/out" || fail "$example: $(cat "$WORK/out")"
  done
  count=$((count + 1))
done
[[ $count -ge 3 ]] || fail "expected examples, found $count"

# `test` reports a failing case, with what differs, and exits 1.
sed 's/"kb": 4}/"kb": 5}/' "$SOURCE_DIR/examples/clicks_filter.toml" >"$WORK/broken.toml"
run_expect 1 "$STREAMCTL" test "$WORK/broken.toml"
assert_contains "$WORK/out" "FAIL  keeps large successful views"
assert_contains "$WORK/out" "missing:"
assert_contains "$WORK/out" "1 passed, 1 failed"

# Test runs are not jobs of the user's: `list` shows none of them, and they leave nothing.
run_expect 0 "$STREAMCTL" list
if grep -q "clicks-filter" "$WORK/out"; then cat "$WORK/out" >&2; fail "test runs are listed as jobs"; fi

# The README's example runs as documented.
"$STREAMCTL" run "$SOURCE_DIR/examples/clicks_filter.toml" <"$SOURCE_DIR/examples/data/clicks.jsonl" >"$WORK/readme"
[[ -s "$WORK/readme" ]] || fail "the README example printed nothing"
assert_no_processes_left
echo ok
