# Warnings for silent data mistakes (issue 10 part 6): a misspelt field, which reads as null in
# every record (a filter on it drops everything, with exit 0), and a window with no event time,
# are reported on stderr with file:line:col by `validate` and by `run`, and a filter that
# passed on nothing by the end of the run; a correct pipeline gets none. Warnings never change
# the exit code or the output. `status` shows them while the job runs (once enough records
# show them) and after it ended.
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

# --- in status: while the job runs, and after ---
live() { # WHERE: an unbounded job with checkpoints off, run detached
  cat <<TOML
name = "live"
[sources.g]
type = "generator"
profile = "clicks"
rate = 4000
[operators.ok]
type = "filter"
inputs = ["g"]
where = "$1"
[sinks.out]
type = "file"
inputs = ["ok"]
path = "$WORK/live-out"
TOML
}
live "status == 200" >"$WORK/live-good.toml"
live "staus == 200" >"$WORK/live-typo.toml"
run_expect 0 "$STREAMCTL" run --detach "$WORK/live-good.toml"
good=$(cat "$WORK/out")
run_expect 0 "$STREAMCTL" run --detach "$WORK/live-typo.toml"
typo=$(cat "$WORK/out")
deadline=$((SECONDS + 30))
until "$STREAMCTL" status "$typo" >"$WORK/status" 2>&1 && grep -q "passed on none" "$WORK/status"; do
  ((SECONDS < deadline)) || { cat "$WORK/status" >&2; fail "status never showed the filter that drops everything"; }
  sleep 0.5
done
assert_contains "$WORK/status" "warning: $WORK/live-typo.toml:6:1: filter 'ok' passed on none of the"
assert_contains "$WORK/status" "reads field 'staus', which none of the"
run_expect 0 "$STREAMCTL" status "$typo" --json
python3 -c 'import json,sys; w=json.load(open(sys.argv[1]))["warnings"]; assert any("staus" in l for l in w), w' "$WORK/out" ||
  fail "status --json has no warnings: $(cat "$WORK/out")"
# The correct job has read as many records by now, and gets no warning.
run_expect 0 "$STREAMCTL" status "$good"
if grep -q "warning" "$WORK/out"; then cat "$WORK/out" >&2; fail "status of a correct job shows warnings"; fi
# After the job: the end-of-run warnings, from job.json.
for id in "$typo" "$good"; do run_expect 0 "$STREAMCTL" stop --drain "$id"; done
for id in "$typo" "$good"; do
  deadline=$((SECONDS + 30))
  until "$STREAMCTL" status "$id" >"$WORK/status" 2>&1 && grep -qE "\): (finished|stopped)" "$WORK/status"; do
    ((SECONDS < deadline)) || { cat "$WORK/status" >&2; fail "job $id did not end"; }
    sleep 0.2
  done
done
"$STREAMCTL" status "$typo" >"$WORK/status"
assert_contains "$WORK/status" "warning: $WORK/live-typo.toml:6:1: filter 'ok' passed on none of the"
"$STREAMCTL" status "$good" >"$WORK/status"
if grep -q "warning" "$WORK/status"; then cat "$WORK/status" >&2; fail "status of a correct ended job shows warnings"; fi
assert_no_processes_left
