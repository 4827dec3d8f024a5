# Every kind of pipeline problem is reported as FILE:LINE:COL: message, all at once, with exit
# 2 and nothing started.
source "$(dirname "$0")/lib/common.bash"

# check_error FILE LINE:COL TEXT: `validate` and `run` both exit 2 and report the problem there.
check_error() {
  local file=$1 position=$2 text=$3
  run_expect 2 "$STREAMCTL" validate "$file"
  assert_contains "$WORK/err" "$file:$position:"
  assert_contains "$WORK/err" "$text"
  run_expect 2 "$STREAMCTL" run "$file"
  assert_contains "$WORK/err" "$file:$position:"
  [[ ! -d "$STREAMCTL_STATE_DIR/jobs" ]] || fail "a job was registered for an invalid pipeline"
}

base() {
  cat <<'TOML'
name = "v"
[sources.in]
type = "stdin"
[operators.ok]
type = "filter"
inputs = ["in"]
where = "status == 200"
[sinks.out]
type = "stdout"
inputs = ["ok"]
TOML
}

base >"$WORK/good.toml"
run_expect 0 "$STREAMCTL" validate "$WORK/good.toml"

base | sed 's/^where = .*/wher = "status == 200"/' >"$WORK/unknown_key.toml"
check_error "$WORK/unknown_key.toml" 7:1 "did you mean 'where'"

base | sed 's/^name = "v"/name = "v"\nparallelism = "two"/' >"$WORK/wrong_type.toml"
check_error "$WORK/wrong_type.toml" 2:15 "integer"

base | sed 's/^inputs = \["ok"\]/inputs = ["okk"]/' >"$WORK/dangling.toml"
check_error "$WORK/dangling.toml" 10:11 "okk"

cat >"$WORK/cycle.toml" <<'TOML'
name = "v"
[sources.in]
type = "stdin"
[operators.a]
type = "filter"
inputs = ["in", "b"]
where = "true"
[operators.b]
type = "filter"
inputs = ["a"]
where = "true"
[sinks.out]
type = "stdout"
inputs = ["b"]
TOML
run_expect 2 "$STREAMCTL" validate "$WORK/cycle.toml"
assert_contains "$WORK/err" "cycle"

base | sed 's/^where = .*/where = "status == = 200"/' >"$WORK/bad_expr.toml"
run_expect 2 "$STREAMCTL" validate "$WORK/bad_expr.toml"
assert_contains "$WORK/err" "$WORK/bad_expr.toml:7:"

base | sed 's/^where = .*/where = "lowr(user) == \\"a\\""/' >"$WORK/bad_function.toml"
run_expect 2 "$STREAMCTL" validate "$WORK/bad_function.toml"
assert_contains "$WORK/err" "lower"

cat >"$WORK/bad_duration.toml" <<'TOML'
name = "v"
buffer_timeout = "5 sec"
[sources.in]
type = "stdin"
[sinks.out]
type = "stdout"
inputs = ["in"]
TOML
check_error "$WORK/bad_duration.toml" 2:18 "duration"

cat >"$WORK/twice.toml" <<'TOML'
name = "v"
[sources.x]
type = "stdin"
[operators.x]
type = "filter"
inputs = ["x"]
where = "true"
[sinks.out]
type = "stdout"
inputs = ["x"]
TOML
run_expect 2 "$STREAMCTL" validate "$WORK/twice.toml"
assert_contains "$WORK/err" "'x'"

# Several problems: every one is reported, not just the first.
base | sed 's/^where = .*/wher = "1"/; s/^inputs = \["ok"\]/inputs = ["nope"]/' >"$WORK/several.toml"
run_expect 2 "$STREAMCTL" validate "$WORK/several.toml"
[[ $(grep -c "^$WORK/several.toml:[0-9]*:[0-9]*: " "$WORK/err") -ge 2 ]] || fail "expected two problems: $(cat "$WORK/err")"

printf 'name = "v"\n[sources.in\ntype = "stdin"\n' >"$WORK/syntax.toml"
run_expect 2 "$STREAMCTL" validate "$WORK/syntax.toml"
assert_contains "$WORK/err" "$WORK/syntax.toml:2:"

# A missing input file: exit 2 before anything starts, naming the `path` value.
cat >"$WORK/missing_input.toml" <<TOML
name = "v"
[sources.in]
type = "file"
path = "$WORK/does-not-exist-*.jsonl"
[sinks.out]
type = "stdout"
inputs = ["in"]
TOML
check_error "$WORK/missing_input.toml" 4:8 "no file matches"

# An unwritable output path: exit 2 before anything starts.
touch "$WORK/a-file"
cat >"$WORK/unwritable.toml" <<TOML
name = "v"
[sources.in]
type = "stdin"
[sinks.out]
type = "file"
inputs = ["in"]
path = "$WORK/a-file/out"
TOML
check_error "$WORK/unwritable.toml" 7:8 "not a directory"

run_expect 2 "$STREAMCTL" validate "$WORK/no-such-file.toml"
assert_contains "$WORK/err" "no-such-file.toml"
echo ok
