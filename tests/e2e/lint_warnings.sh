# Warnings for silent data mistakes (issue 10 part 6): a misspelt field, which reads as null in
# every record (a filter on it drops everything, with exit 0), and a window with no event time,
# are reported on stderr with file:line:col by `validate` and by `run`, and a filter that
# passed on nothing by the end of the run; a correct pipeline gets none. Warnings never change
# the exit code or the output.
source "$(dirname "$0")/lib/common.bash"

pipeline() { # WHERE EVENT_TIME
  cat <<TOML
name = "lint"
[sources.g]
type = "generator"
profile = "clicks"
count = 1000
$2
[operators.ok]
type = "filter"
inputs = ["g"]
where = "$1"
[operators.per_page]
type = "window"
inputs = ["ok"]
key = ["page"]
window = { kind = "tumbling", size = "1h" }
aggregates = { n = "count()" }
[sinks.out]
type = "stdout"
inputs = ["per_page"]
TOML
}

pipeline "staus == 200" 'event_time = "ts"' >"$WORK/typo.toml"
run_expect 0 "$STREAMCTL" validate "$WORK/typo.toml"
assert_contains "$WORK/err" "typo.toml:8:8: warning: operator 'ok' reads field 'staus', which source 'g' never makes"
assert_contains "$WORK/err" "did you mean 'status'?"
run_expect 0 "$STREAMCTL" run "$WORK/typo.toml"
assert_contains "$WORK/err" "reads field 'staus'"
# At the end of the run, from what the nodes counted: the filter passed nothing on.
assert_contains "$WORK/err" "warning: $WORK/typo.toml:7:1: filter 'ok' passed on none of the 1000 records it read"
[[ ! -s "$WORK/out" ]] || fail "a filter on a field no record has kept records"

pipeline "status == 200" "" >"$WORK/no_time.toml"
run_expect 0 "$STREAMCTL" validate "$WORK/no_time.toml"
assert_contains "$WORK/err" "warning: window 'per_page' has no source with 'event_time' upstream"

pipeline "status == 200" 'event_time = "ts"' >"$WORK/good.toml"
run_expect 0 "$STREAMCTL" validate "$WORK/good.toml"
if grep -q "warning" "$WORK/err"; then cat "$WORK/err" >&2; fail "a correct pipeline got warnings"; fi
run_expect 0 "$STREAMCTL" run "$WORK/good.toml"
if grep -q "warning" "$WORK/err"; then cat "$WORK/err" >&2; fail "a correct run got warnings"; fi
[[ -s "$WORK/out" ]] || fail "the correct pipeline wrote nothing"
