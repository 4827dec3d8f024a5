# Warnings from records (issue 10 part 6): a field that a node reads and that none of its input
# records has reads as null, so a filter on a misspelt field drops everything and a key on one
# puts every record under one key, with exit 0. A file source's fields are not known before
# the run, so only the records show it: `validate --sample` runs the pipeline over a sample and
# says so with file:line:col, and `run` says so at its end. Neither changes the exit code.
source "$(dirname "$0")/lib/common.bash"

make_clicks 2000 >"$WORK/clicks.jsonl"
head -n 100 "$WORK/clicks.jsonl" >"$WORK/sample.jsonl"

pipeline() { # WHERE KEY
  cat <<TOML
name = "sampled"
[sources.clicks]
type = "file"
path = "clicks.jsonl"
event_time = "ts"
[operators.ok]
type = "filter"
inputs = ["clicks"]
where = "$1"
[operators.per_user]
type = "window"
inputs = ["ok"]
key = ["$2"]
window = { kind = "tumbling", size = "1h" }
aggregates = { n = "count()", bytes = "sum(bytes)" }
[sinks.out]
type = "stdout"
inputs = ["per_user"]
TOML
}

# A filter on a misspelt field: the sample shows that no record has it.
pipeline "usr != 'u1'" "user" >"$WORK/typo.toml"
run_expect 0 "$STREAMCTL" validate "$WORK/typo.toml" --sample "$WORK/sample.jsonl"
assert_contains "$WORK/err" "$WORK/typo.toml:6:1: warning: filter 'ok' reads field 'usr', which none of the 100 records it read had (did you mean 'user'?)"
assert_contains "$WORK/err" "$WORK/typo.toml:6:1: warning: filter 'ok' passed on none of the 100 records it read"
[[ ! -s "$WORK/out" ]] || fail "validate --sample wrote to stdout"

# The same pipeline run for real says it at its end, and still exits 0.
run_expect 0 "$STREAMCTL" run "$WORK/typo.toml"
assert_contains "$WORK/err" "warning: $WORK/typo.toml:6:1: filter 'ok' reads field 'usr', which none of the first 1024 records it read had (did you mean 'user'?)"

# A keyed window whose key is misspelt: every record would count under one null key.
pipeline "user != 'u1'" "usre" >"$WORK/key_typo.toml"
run_expect 0 "$STREAMCTL" validate "$WORK/key_typo.toml" --sample "$WORK/sample.jsonl"
assert_contains "$WORK/err" "$WORK/key_typo.toml:10:1: warning: window 'per_user' reads field 'usre', which none of the"
assert_contains "$WORK/err" "(did you mean 'user'?)"

# The correct pipeline: no warning, nothing on stdout, the ok line.
pipeline "user != 'u1'" "user" >"$WORK/good.toml"
run_expect 0 "$STREAMCTL" validate "$WORK/good.toml" --sample "$WORK/sample.jsonl"
if grep -q "warning" "$WORK/err"; then cat "$WORK/err" >&2; fail "a correct pipeline got warnings"; fi
assert_contains "$WORK/err" "good.toml: ok"
[[ ! -s "$WORK/out" ]] || fail "validate --sample wrote to stdout"
# Nothing was written where the pipeline writes, and the sample run left nothing behind.
assert_no_processes_left
[[ -z "$(ls -A "$STREAMCTL_STATE_DIR/samples" 2>/dev/null)" ]] || fail "the sample run left files behind"

# A sample that cannot be read, and a source with no path to replace: exit 2, nothing run.
run_expect 2 "$STREAMCTL" validate "$WORK/good.toml" --sample "$WORK/missing.jsonl"
assert_contains "$WORK/err" "cannot read the sample file '$WORK/missing.jsonl'"
sed 's/type = "file"/type = "stdin"/; /^path = /d' "$WORK/good.toml" >"$WORK/stdin.toml"
run_expect 2 "$STREAMCTL" validate "$WORK/stdin.toml" --sample "$WORK/sample.jsonl"
assert_contains "$WORK/err" "source 'clicks' is of type 'stdin', which has no path to replace"
