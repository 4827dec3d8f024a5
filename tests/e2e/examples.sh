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
# csv_errors on its own data: the two bad rows go to the dead-letter file with their line
# numbers and reasons, and every good row with status >= 400 comes out.
"$STREAMCTL" run "$SOURCE_DIR/examples/csv_errors.toml" --set "sources.rows.dead_letter=$WORK/dead.jsonl" \
  >"$WORK/csv_out" 2>"$WORK/csv_err" || fail "csv_errors: $(cat "$WORK/csv_err")"
[[ $(wc -l <"$WORK/dead.jsonl") == 2 ]] || fail "csv_errors: dead letters: $(cat "$WORK/dead.jsonl")"
assert_contains "$WORK/dead.jsonl" '"line":13,'
assert_contains "$WORK/dead.jsonl" "cannot convert 'oops' to int"
assert_contains "$WORK/dead.jsonl" "expected 5 columns, got 4"
expected=$(awk -F, 'NR > 1 && NF == 5 && $4 ~ /^[0-9]+$/ && $4 >= 400' "$SOURCE_DIR/examples/data/clicks.csv" | wc -l)
[[ $expected -gt 0 && $(wc -l <"$WORK/csv_out") == "$expected" ]] ||
  fail "csv_errors: $(wc -l <"$WORK/csv_out") rows out, expected $expected"

assert_no_processes_left
echo ok
